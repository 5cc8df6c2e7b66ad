// Dense attention for the rows that chose everything, gathered cells for the others.
#include "model/blocks/selected_attention.h"

#include <cstring>

#include "core/error.h"

namespace sluice::model {

void KeySelection::reserve(int64_t n_batch, int64_t top_k_) {
  top_k = top_k_;
  positions.resize(size_t(n_batch * top_k));
  everything.resize(size_t(n_batch));
}

void attend_selected(Backend& backend, const AttentionCall& call, KeySelection& keys,
                     int64_t row0) {
  if (call.window != 0) fail("sparse attention: a sliding window is not supported");
  const KvLayerView& kv = call.kv;
  const size_t element = kv.type == KvElement::kF16 ? 2 : 4;
  const size_t k_cell = size_t(kv.n_head_kv * kv.head_dim_k) * element;
  const size_t v_cell = size_t(kv.n_head_kv * kv.head_dim_v) * element;
  const int64_t q_row = call.n_head * kv.head_dim_k;
  const int64_t out_row = call.n_head * kv.head_dim_v;
  int64_t t = 0;
  while (t < call.n_tokens) {
    if (keys.everything[size_t(row0 + t)] != 0) {
      // Dense path: these queries see at most top_k positions, so the indexer chose them all and
      // the attention is exactly the ordinary causal one.
      int64_t end = t + 1;
      while (end < call.n_tokens && keys.everything[size_t(row0 + end)] != 0) ++end;
      AttentionCall dense = call;
      dense.q = call.q + t * q_row;
      dense.out = call.out + t * out_row;
      dense.n_tokens = end - t;
      dense.pos0 = call.pos0 + t;
      backend.attention(dense);
      t = end;
      continue;
    }
    // Sparse path: the row's top_k cells, copied in ascending position order into a cache of
    // their own, which the row's query then reads whole (it sits at the last of them).
    const int64_t n_keys = keys.top_k;
    keys.gathered_k.resize(size_t(n_keys) * k_cell);
    keys.gathered_v.resize(size_t(n_keys) * v_cell);
    const int32_t* chosen = keys.positions.data() + (row0 + t) * n_keys;
    for (int64_t j = 0; j < n_keys; ++j) {
      const int64_t cell = chosen[j] % kv.capacity;
      std::memcpy(keys.gathered_k.data() + size_t(j) * k_cell,
                  static_cast<const uint8_t*>(kv.k) + size_t(cell) * k_cell, k_cell);
      std::memcpy(keys.gathered_v.data() + size_t(j) * v_cell,
                  static_cast<const uint8_t*>(kv.v) + size_t(cell) * v_cell, v_cell);
    }
    AttentionCall sparse = call;
    sparse.q = call.q + t * q_row;
    sparse.out = call.out + t * out_row;
    sparse.n_tokens = 1;
    sparse.pos0 = n_keys - 1;
    sparse.kv.k = keys.gathered_k.data();
    sparse.kv.v = keys.gathered_v.data();
    sparse.kv.capacity = n_keys;
    backend.attention(sparse);
    ++t;
  }
}

}  // namespace sluice::model
