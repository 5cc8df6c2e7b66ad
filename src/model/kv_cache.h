// KvCache: the keys and values of every attention layer of one session. Each layer is a ring of
// cells (cell = position % capacity): full-attention layers hold n_ctx cells, sliding-window
// layers only window + n_batch - 1 — enough that a whole prefill chunk can be written before its
// first query reads the oldest position it still needs. A recurrent layer (the gated delta net of
// qwen35 / qwen3next) holds no keys or values but a fixed-size state that every position it has
// seen was folded into: it can be continued from where it stands or started over, never rewound.
// Everything is in the backend's memory (the device's for a GPU backend). Knows nothing of tokens
// or weights.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_array.h"

namespace sluice::model {

struct KvLayerSpec {
  int64_t n_head_kv = 0;
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
  int64_t window = 0;  // 0: full attention
  // A recurrent layer: floats of its convolution state (the last conv_kernel - 1 inputs) and of
  // its recurrent state (the delta rule's matrices), one of each per sequence; n_head_kv,
  // head_dim_* and window are 0. Both 0: an attention layer.
  int64_t conv_state = 0;
  int64_t recurrent_state = 0;

  bool is_recurrent() const { return conv_state > 0 || recurrent_state > 0; }
};

// A recurrent layer's state as its forward reads and updates it. `positions` counts the positions
// folded into it (0..positions-1); the forward advances it after each run. conv and state are
// backend memory (ops only); positions is host memory.
struct RecurrentLayerView {
  float* conv = nullptr;   // [conv_state]
  float* state = nullptr;  // [recurrent_state]
  int64_t* positions = nullptr;
};

class KvCache {
 public:
  // Keys, values and recurrent states in `backend`'s memory (the device's for a GPU backend).
  KvCache(std::vector<KvLayerSpec> layers, int64_t n_ctx, int64_t n_batch, KvElement type,
          Backend& backend);

  KvLayerView layer(int64_t index);
  // The state of recurrent layer `index` for a run that starts at position pos0: zeroed when pos0
  // is 0 (a sequence starts over: an upload of zeros), otherwise pos0 must be exactly the positions
  // it already holds — a recurrent state cannot be rewound, so anything else is refused.
  RecurrentLayerView recurrent(int64_t index, int64_t pos0);
  bool has_recurrent_layers() const;
  const KvLayerSpec& spec(int64_t index) const { return layers_[size_t(index)]; }
  int64_t n_layer() const { return int64_t(layers_.size()); }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t n_batch() const { return n_batch_; }
  uint64_t bytes() const;

  // How many of the first `n_keep` positions can be kept when the session, which has written
  // positions [0, n_written), continues at n_keep: n_keep itself, or 0 when a sliding layer's
  // ring has already overwritten positions that queries after n_keep would still read. With
  // recurrent layers only the whole written sequence can be continued (n_keep == n_written):
  // their state holds every position written and cannot be cut back, so any shorter prefix
  // means starting over from position 0 (as does a state out of step with n_written).
  int64_t reusable_prefix(int64_t n_keep, int64_t n_written) const;

  // Copies the cells of positions [0, n) that a continuation at n can still read (all of them
  // in full layers, the last `capacity` in rings) from `source`, a cache of the same layout
  // that has written positions [0, n_written) and still holds them (reusable_prefix says so).
  // Recurrent layers copy their whole state, so there n must be n_written.
  void copy_prefix_from(const KvCache& source, int64_t n, int64_t n_written);

 private:
  struct Layer {
    int64_t capacity = 0;
    BackendArray<uint8_t> k;  // [capacity, n_head_kv, head_dim_k] of F16 or F32
    BackendArray<uint8_t> v;  // [capacity, n_head_kv, head_dim_v]
    // Recurrent layers only (always float32, as llama.cpp keeps them).
    BackendArray<float> conv;   // [conv_state]
    BackendArray<float> state;  // [recurrent_state]
    int64_t positions = 0;      // folded into conv / state
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
