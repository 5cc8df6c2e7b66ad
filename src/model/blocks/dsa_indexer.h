// The lightning indexer of DeepSeek sparse attention (GLM-5's glm-dsa): a cheap attention of its
// own that scores every earlier position for each query and keeps the top_k, which the layer's
// MLA attention then reads alone (blocks/selected_attention). Its queries come from MLA's normed
// query latent through indexer.attn_q_b (n_head heads of head_dim), its single key head from the
// layer input through indexer.attn_k and a LayerNorm (weight and bias, epsilon 0 as llama.cpp
// reads none for glm-dsa); both rotate their first n_rot dimensions as MLA does and, when head_dim
// is a power of two of at least 64, go through the orthonormal Walsh–Hadamard rotation llama.cpp
// applies (it leaves the scores unchanged but not the F16 cache's rounding). The keys are cached
// in a KV layer of their own ({1, head_dim, 0}). score(query t, position j) =
// Σ_h ReLU(q_{t,h} · k_j) · w_{t,h}, w = indexer.proj · x / √(head_dim · n_head). Every step is
// a backend op on backend memory (the scores and the top-k choice are Backend ops of their own),
// so the choice never visits the host. Knows no architecture.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_array.h"
#include "model/blocks/selected_attention.h"
#include "model/blocks/trace.h"
#include "model/kv_cache.h"
#include "model/weights.h"

namespace sluice::model {

struct DsaIndexerShape {
  int64_t n_embd = 0;
  int64_t q_lora_rank = 0;  // the query latent the indexer's queries start from
  int64_t n_head = 0;
  int64_t head_dim = 0;
  int64_t n_rot = 0;  // leading dimensions of each head that rotate
  int64_t top_k = 0;

  KvLayerSpec kv_spec() const { return {1, head_dim, 0, 0}; }
  // llama.cpp rotates by the Walsh–Hadamard matrix of head_dim (it cannot run other sizes).
  bool hadamard() const { return head_dim >= 64 && (head_dim & (head_dim - 1)) == 0; }
};

struct DsaIndexerWeights {
  MatrixView wq_b;              // [q_lora, n_head * head_dim] indexer.attn_q_b
  MatrixView wk;                // [n_embd, head_dim] indexer.attn_k
  std::vector<float> k_norm;    // [head_dim] indexer.k_norm.weight
  std::vector<float> k_norm_b;  // [head_dim] indexer.k_norm.bias
  MatrixView proj;              // [n_embd, n_head] indexer.proj
  std::vector<float> rotation;  // [head_dim, head_dim] Walsh–Hadamard, when shape.hadamard()
};

// blk.<layer>.indexer.*: nullopt when the layer has none of them (its attention is then dense);
// a layer with only some of them is refused.
std::optional<DsaIndexerWeights> bind_dsa_indexer(WeightBinder& binder, int64_t layer,
                                                  const DsaIndexerShape& shape);

struct DsaIndexerScratch {
  BackendArray<float> q;       // [n_batch, n_head, head_dim]
  BackendArray<float> k;       // [n_batch, head_dim]
  BackendArray<float> w;       // [n_batch, n_head]
  BackendArray<float> turned;  // [n_batch, n_head, head_dim] the rotation's output
  BackendArray<float> scores;  // [rows, n_keys] a block of rows' scores, grown as keys accrue
  void reserve(Backend& backend, const DsaIndexerShape& shape, int64_t n_batch);
};

// Layer `layer`'s indexer over x [n_tokens, n_embd] (the attention's normed input) and q_latent
// [n_tokens, q_lora] (MLA's normed query latent): appends each run's keys to its cache's layer
// `kv_layer` and fills `keys` with the positions every row attends to.
void dsa_indexer_select(Backend& backend, const DsaIndexerWeights& w, const DsaIndexerShape& s,
                        const RopeConfig& rope, std::span<const SequenceRun> sequences,
                        int64_t layer, int64_t kv_layer, const float* x, const float* q_latent,
                        int64_t n_tokens, DsaIndexerScratch& scratch, KeySelection& keys,
                        const Trace& trace);

// The selection step alone, for one run whose keys are already cached in `cached`: rows row0 ..
// row0 + n_tokens - 1 (positions pos0 ..) with queries q [n_tokens, n_head, head_dim] and
// weights w [n_tokens, n_head] (already scaled; all backend memory). A row at position p sees
// p + 1 keys; when that is at most top_k it chooses everything, otherwise its top_k positions by
// score, ascending (Backend::indexer_scores, then Backend::top_k_positions).
void dsa_select_keys(Backend& backend, const DsaIndexerShape& s, const KvLayerView& cached,
                     const float* q, const float* w, int64_t pos0, int64_t n_tokens, int64_t row0,
                     DsaIndexerScratch& scratch, KeySelection& keys);

}  // namespace sluice::model
