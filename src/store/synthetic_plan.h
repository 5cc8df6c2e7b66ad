// The common planner of synthetic models: a list of tensors (name, type, shape, how its values
// look) and the architecture's metadata keys. One file per architecture
// (synthetic_<architecture>.cpp) fills both from a geometry, exactly as llama.cpp names and
// shapes them; synthetic_model.cpp streams the result through the GGUF writer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "format/meta_value.h"
#include "quant/qtype.h"
#include "store/synthetic_geometry.h"
#include "store/synthetic_weights.h"

namespace sluice {

struct PlannedTensor {
  std::string name;
  QType type = QType::F32;
  std::vector<uint64_t> shape;
  WeightSpread spread;
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
};

class TensorPlan {
 public:
  // A weight matrix; values with rms gain/sqrt(row length) keep each product's output near the
  // scale of its input, so activations stay well-behaved through every layer. A row length that
  // is no whole block of `type` is refused, naming the tensor.
  void matrix(std::string name, QType type, std::vector<uint64_t> shape, float gain = 1.0f);
  // Like matrix, but rows that are no whole block of `type` fall back to Q8_0 (then F16), as
  // llama.cpp's quantizer does for tensors such as MLA's attn_k_b.
  void matrix_or_fallback(std::string name, QType type, std::vector<uint64_t> shape);
  // An RMSNorm weight: 1 ± 0.1, always F32 as in real files.
  void norm(std::string name, uint64_t n);
  // Values of root-mean-square `rms` around zero, at the given type (embeddings, biases, sinks,
  // hyper-connection and compressor vectors).
  void table(std::string name, QType type, std::vector<uint64_t> shape, float rms);
  // F32 values uniform in -[lo, hi]: a recurrent decay (ssm_a) must be negative.
  void negative(std::string name, std::vector<uint64_t> shape, float lo, float hi);
  // I32 rows of `shape[0]` distinct expert ids below `n_expert` (a hash-routing table).
  void expert_ids(std::string name, std::vector<uint64_t> shape, uint32_t n_expert);

  std::vector<PlannedTensor>& tensors() { return tensors_; }

 private:
  void add(std::string name, QType type, std::vector<uint64_t> shape, WeightSpread spread);

  std::vector<PlannedTensor> tensors_;
};

// general.architecture-prefixed metadata keys, in the order added.
class ArchKeys {
 public:
  explicit ArchKeys(std::string_view architecture) : arch_(architecture) {}
  void u32(const std::string& key, uint32_t value) { add(key, MetaValue::scalar(value)); }
  void f32(const std::string& key, float value) { add(key, MetaValue::scalar(value)); }
  void boolean(const std::string& key, bool value) { add(key, MetaValue::scalar(value)); }
  void str(const std::string& key, std::string value) {
    add(key, MetaValue::string(std::move(value)));
  }
  template <class T>
  void array(const std::string& key, const std::vector<T>& values) {
    add(key, MetaValue::array(values));
  }
  // The keys of every architecture: block_count, context_length, embedding_length,
  // attention.head_count(_kv), rms epsilon, rope.freq_base, vocab_size.
  void common(const SyntheticGeometry& g, uint32_t layers);

  std::vector<std::pair<std::string, MetaValue>>& entries() { return entries_; }

 private:
  void add(const std::string& key, MetaValue value) {
    entries_.emplace_back(arch_ + "." + key, std::move(value));
  }
  std::string arch_;
  std::vector<std::pair<std::string, MetaValue>> entries_;
};

struct SyntheticTypes {
  QType type = QType::Q8_0;         // matrices outside the experts
  QType expert_type = QType::Q4_K;  // routed experts
};

// What an architecture's planner gets and fills.
struct SyntheticPlanRequest {
  const SyntheticGeometry& geometry;
  uint32_t layers;
  SyntheticTypes types;
};

using SyntheticPlanner = void (*)(const SyntheticPlanRequest& request, TensorPlan& plan,
                                  ArchKeys& keys);

// "blk.<layer>." — the prefix of a layer's tensor names.
std::string block_prefix(uint32_t layer);

// A decoder's two ends: token_embd (rows of rms 1: they enter an RMSNorm directly, on the scale
// the layers add to the residual stream, so the input token still shows in the last layer),
// output_norm and output.
void plan_embedding_and_head(TensorPlan& plan, QType type, uint64_t n_embd, uint64_t n_vocab);
// <blk>attn_{q,k,v,output}.weight of grouped-query attention: q = heads × head_dim, kv likewise.
void plan_gqa_projections(TensorPlan& plan, const std::string& blk, QType type, uint64_t n_embd,
                          uint64_t q, uint64_t kv);

// The planners, one per file.
void plan_qwen3moe(const SyntheticPlanRequest& request, TensorPlan& plan, ArchKeys& keys);
void plan_deepseek4(const SyntheticPlanRequest& request, TensorPlan& plan, ArchKeys& keys);
void plan_glm_dsa(const SyntheticPlanRequest& request, TensorPlan& plan, ArchKeys& keys);
void plan_qwen35moe(const SyntheticPlanRequest& request, TensorPlan& plan, ArchKeys& keys);
void plan_llama(const SyntheticPlanRequest& request, TensorPlan& plan, ArchKeys& keys);

// The planner of general.architecture `architecture`; a sluice::Error naming it otherwise.
SyntheticPlanner synthetic_planner(std::string_view architecture);

}  // namespace sluice
