// The lightning indexer, step for step as llama.cpp's glm-dsa graph with its fused CPU indexer
// operation: projections, LayerNorm, RoPE, Hadamard rotation, key cache write, ReLU-weighted
// scores summed over the heads in head order, top_k.
#include "model/blocks/dsa_indexer.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace sluice::model {
namespace {

constexpr const char* kIndexerTensors[] = {"indexer.attn_q_b.weight", "indexer.attn_k.weight",
                                           "indexer.k_norm.weight", "indexer.k_norm.bias",
                                           "indexer.proj.weight"};

// At most this many scores are held at once (a block of query rows against every key).
constexpr int64_t kMaxScores = int64_t(1) << 22;

// The orthonormal Walsh–Hadamard matrix of order n (a power of two) in Sylvester's ordering, as
// llama.cpp builds its indexer rotation: entries ±1/√n, symmetric, its own inverse.
std::vector<float> walsh_hadamard(int64_t n) {
  std::vector<float> m(size_t(n * n));
  m[0] = float(1.0 / std::sqrt(float(n)));
  for (int64_t s = 1; s < n; s *= 2) {
    for (int64_t i = 0; i < s; ++i) {
      for (int64_t j = 0; j < s; ++j) {
        const float value = m[size_t(i * n + j)];
        m[size_t((i + s) * n + j)] = value;
        m[size_t(i * n + j + s)] = value;
        m[size_t((i + s) * n + j + s)] = -value;
      }
    }
  }
  return m;
}

// rows [n_rows, n] = rotation · rows, row by row.
void rotate(Backend& backend, const std::vector<float>& rotation, int64_t n, float* rows,
            int64_t n_rows, float* scratch) {
  backend.matmul(MatrixView{QType::F32, rotation.data(), n, n}, rows, scratch, n_rows);
  backend.copy(rows, scratch, sizeof(float) * size_t(n_rows * n));
}

}  // namespace

std::optional<DsaIndexerWeights> bind_dsa_indexer(WeightBinder& binder, int64_t layer,
                                                  const DsaIndexerShape& s) {
  int present = 0;
  for (const char* name : kIndexerTensors) present += binder.has(layer_tensor(layer, name)) ? 1 : 0;
  if (present == 0) return std::nullopt;
  if (present != int(std::size(kIndexerTensors))) {
    fail("blk.", layer, ": the DSA indexer needs all of indexer.{attn_q_b,attn_k,proj}.weight and ",
         "indexer.k_norm.{weight,bias}; the file has only ", present, " of them");
  }
  DsaIndexerWeights w;
  w.wq_b = binder.matrix(layer_tensor(layer, "indexer.attn_q_b.weight"), s.q_lora_rank,
                         s.n_head * s.head_dim);
  w.wk = binder.matrix(layer_tensor(layer, "indexer.attn_k.weight"), s.n_embd, s.head_dim);
  w.k_norm = binder.vector(layer_tensor(layer, "indexer.k_norm.weight"), s.head_dim);
  w.k_norm_b = binder.vector(layer_tensor(layer, "indexer.k_norm.bias"), s.head_dim);
  w.proj = binder.matrix(layer_tensor(layer, "indexer.proj.weight"), s.n_embd, s.n_head);
  if (s.hadamard()) w.rotation = walsh_hadamard(s.head_dim);
  return w;
}

void DsaIndexerScratch::reserve(Backend& backend, const DsaIndexerShape& s, int64_t n_batch) {
  q.resize(backend, size_t(n_batch * s.n_head * s.head_dim));
  k.resize(backend, size_t(n_batch * s.head_dim));
  w.resize(backend, size_t(n_batch * s.n_head));
  turned.resize(backend, size_t(n_batch * s.n_head * s.head_dim));
}

void dsa_indexer_select(Backend& backend, const DsaIndexerWeights& w, const DsaIndexerShape& s,
                        const RopeConfig& rope, std::span<const SequenceRun> sequences,
                        int64_t layer, int64_t kv_layer, const float* x, const float* q_latent,
                        int64_t n, DsaIndexerScratch& m, KeySelection& keys, const Trace& trace) {
  const int64_t n_head = s.n_head, d = s.head_dim;
  float* q = m.q.data();
  float* k = m.k.data();
  backend.matmul(w.wq_b, q_latent, q, n);
  backend.matmul(w.wk, x, k, n);
  backend.layer_norm(k, w.k_norm.data(), w.k_norm_b.data(), k, n, d, 0.0f);
  for (const SequenceRun& run : sequences) {
    backend.rope(q + run.row0 * n_head * d, run.n_tokens, n_head, d, run.pos0, rope);
    backend.rope(k + run.row0 * d, run.n_tokens, 1, d, run.pos0, rope);
  }
  if (!w.rotation.empty()) {
    rotate(backend, w.rotation, d, q, n * n_head, m.turned.data());
    rotate(backend, w.rotation, d, k, n, m.turned.data());
  }
  trace("indexer_q", layer, q, n_head * d);
  trace("indexer_k", layer, k, d);
  // The per-head weights, pre-scaled as llama.cpp does so the scores need no scaling of their own.
  backend.matmul(w.proj, x, m.w.data(), n);
  backend.scale(m.w.data(), 1.0f / std::sqrt(float(d * n_head)), n * n_head);
  trace("indexer_weights", layer, m.w.data(), n_head);

  for (const SequenceRun& run : sequences) {
    const KvLayerView cached = run.kv->layer(kv_layer);
    // The indexer's cache has no values (head_dim_v 0): kv_store reads none of `v`.
    backend.kv_store(cached, k + run.row0 * d, k + run.row0 * d, run.n_tokens, run.pos0);
    dsa_select_keys(backend, s, cached, q + run.row0 * n_head * d, m.w.data() + run.row0 * n_head,
                    run.pos0, run.n_tokens, run.row0, m, keys);
  }
}

void dsa_select_keys(Backend& backend, const DsaIndexerShape& s, const KvLayerView& cached,
                     const float* q, const float* w, int64_t pos0, int64_t n_tokens, int64_t row0,
                     DsaIndexerScratch& m, KeySelection& keys) {
  const int64_t n_head = s.n_head, d = s.head_dim, top_k = s.top_k;
  // Row t sees pos0 + t + 1 keys: while that is at most top_k the indexer chooses them all.
  const int64_t n_everything = std::clamp<int64_t>(top_k - pos0, 0, n_tokens);
  for (int64_t t = 0; t < n_tokens; ++t) keys.everything[size_t(row0 + t)] = t < n_everything;
  if (n_everything == n_tokens) return;

  // Blocks of rows' scores over every key they can see, then each row's top_k of them.
  const int64_t t_first = n_everything;
  const int64_t block = std::max<int64_t>(1, kMaxScores / (pos0 + n_tokens));
  for (int64_t t0 = t_first; t0 < n_tokens; t0 += block) {
    const int64_t rows = std::min(block, n_tokens - t0);
    const int64_t n_keys = pos0 + t0 + rows;  // the block's last row sees them all
    const size_t need = size_t(rows * n_keys);
    // Grown geometrically: a decode step sees one key more each time.
    if (m.scores.size() < need) m.scores.resize(backend, std::max(need, 2 * m.scores.size()));
    backend.indexer_scores(q + t0 * n_head * d, w + t0 * n_head, cached, rows, n_head, pos0 + t0,
                           m.scores.data());
    backend.top_k_positions(m.scores.data(), rows, n_keys, pos0 + t0, top_k,
                            keys.positions.data() + (row0 + t0) * top_k);
  }
}

}  // namespace sluice::model
