// ArchMetadata: reads an architecture's hyper-parameters from a ModelFile's metadata under the
// GGUF convention "<arch>.<key>" (llama.embedding_length …), accepting any integer width and
// per-layer arrays where GGUF allows them. A missing required key or a value out of range is a
// sluice::Error naming the key and the file. Knows no particular architecture.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format/model_file.h"

namespace sluice::model {

class ArchMetadata {
 public:
  ArchMetadata(const ModelFile& file, std::string arch);

  const std::string& arch() const { return arch_; }
  const ModelFile& file() const { return file_; }

  // "<arch>.<key>" as an integer (u8…i64) / a float (f32, f64); nullopt when absent.
  std::optional<int64_t> find_int(std::string_view key) const;
  std::optional<float> find_float(std::string_view key) const;
  int64_t get_int(std::string_view key) const;  // required
  float get_float(std::string_view key) const;  // required
  int64_t get_int(std::string_view key, int64_t fallback) const;
  float get_float(std::string_view key, float fallback) const;
  // A per-layer value stored either as one integer or as an array of n_layer integers.
  std::vector<int64_t> get_per_layer(std::string_view key, int64_t n_layer) const;
  std::optional<std::vector<int64_t>> find_per_layer(std::string_view key, int64_t n_layer) const;

  // Fails unless lo <= value <= hi, naming the key.
  int64_t checked(std::string_view key, int64_t value, int64_t lo, int64_t hi) const;

 private:
  std::string full_key(std::string_view key) const;
  [[noreturn]] void refuse(std::string_view key, const std::string& what) const;

  const ModelFile& file_;
  std::string arch_;
};

// The hyper-parameters every decoder-only transformer here shares.
struct DecoderHParams {
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_ff = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
  int64_t n_ctx_train = 0;
  int64_t n_rot = 0;
  float rms_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;
};

// Whether attention.head_count may differ between layers: kUniform refuses a per-layer array
// whose values differ; kPerLayer accepts one (the architecture reads the array itself) and
// n_head is layer 0's, as llama.cpp's hparams.n_head() without a layer.
enum class HeadCounts : uint8_t { kUniform, kPerLayer };

// Reads the shared keys (embedding_length, block_count, attention.head_count …); n_vocab from
// "<arch>.vocab_size" or else the row count of token_embd.weight. head_count_kv, and head_count
// unless `heads` says otherwise, must be the same for every layer.
DecoderHParams read_decoder_hparams(const ArchMetadata& meta,
                                    HeadCounts heads = HeadCounts::kUniform);

// The Mixture-of-Experts keys: expert_count, expert_used_count, expert_feed_forward_length
// (falling back to feed_forward_length), expert_weights_scale / _norm, expert_gating_func,
// expert_group_count / expert_group_used_count, leading_dense_block_count and the shared
// experts' expert_shared_count / expert_shared_feed_forward_length.
struct MoeHParams {
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;
  int64_t n_expert_shared = 0;
  int64_t n_ff_shexp = 0;
  int64_t n_layer_dense_lead = 0;  // the first layers have a dense FFN instead
  int64_t n_group = 0;
  int64_t n_group_used = 0;
  float weights_scale = 0.0f;
  std::optional<bool> weights_norm;    // absent: the architecture's default
  std::optional<int64_t> gating_func;  // llama.cpp: 1 softmax, 2 sigmoid, 3 softmax of chosen
};
MoeHParams read_moe_hparams(const ArchMetadata& meta, const DecoderHParams& hp);

}  // namespace sluice::model
