// KvCache: the keys and values of every attention layer of one session. Each layer is a ring of
// cells (cell = position % capacity): full-attention layers hold n_ctx cells, sliding-window
// layers only window + n_batch - 1 — enough that a whole prefill chunk can be written before its
// first query reads the oldest position it still needs. Knows nothing of tokens or weights.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace sluice::model {

struct KvLayerSpec {
  int64_t n_head_kv = 0;
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
  int64_t window = 0;  // 0: full attention
};

class KvCache {
 public:
  KvCache(std::vector<KvLayerSpec> layers, int64_t n_ctx, int64_t n_batch, KvElement type);

  KvLayerView layer(int64_t index);
  const KvLayerSpec& spec(int64_t index) const { return layers_[size_t(index)]; }
  int64_t n_layer() const { return int64_t(layers_.size()); }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t n_batch() const { return n_batch_; }
  uint64_t bytes() const;

  // How many of the first `n_keep` positions can be kept when the session, which has written
  // positions [0, n_written), continues at n_keep: n_keep itself, or 0 when a sliding layer's
  // ring has already overwritten positions that queries after n_keep would still read.
  int64_t reusable_prefix(int64_t n_keep, int64_t n_written) const;

  // Copies the cells of positions [0, n) that a continuation at n can still read (all of them
  // in full layers, the last `capacity` in rings) from `source`, a cache of the same layout
  // that has written positions [0, n_written) and still holds them (reusable_prefix says so).
  void copy_prefix_from(const KvCache& source, int64_t n, int64_t n_written);

 private:
  struct Layer {
    int64_t capacity = 0;
    std::vector<uint8_t> k;  // [capacity, n_head_kv, head_dim_k] of F16 or F32
    std::vector<uint8_t> v;  // [capacity, n_head_kv, head_dim_v]
  };

  std::vector<KvLayerSpec> layers_;
  std::vector<Layer> storage_;
  int64_t n_ctx_;
  int64_t n_batch_;
  KvElement type_;
};

// A run of consecutive tokens of one sequence within a forward's chunk: rows [row0, row0 +
// n_tokens) of every activation continue `kv` from position pos0. A session's forward has one
// run; a batched decode step has one per request (one token each), so every weight is read once
// for all of them while each token attends only to its own sequence.
struct SequenceRun {
  KvCache* kv = nullptr;
  int64_t pos0 = 0;
  int64_t row0 = 0;
  int64_t n_tokens = 0;
};

}  // namespace sluice::model
