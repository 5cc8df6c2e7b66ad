// Dense attention for the rows that chose everything, their chosen cells for the others.
#include "model/blocks/selected_attention.h"

#include "core/error.h"

namespace sluice::model {

void KeySelection::reserve(Backend& backend, int64_t n_batch, int64_t top_k_) {
  top_k = top_k_;
  positions.resize(backend, size_t(n_batch * top_k));
  everything.resize(size_t(n_batch));
}

void attend_selected(Backend& backend, const AttentionCall& call, KeySelection& keys,
                     int64_t row0) {
  if (call.window != 0) fail("sparse attention: a sliding window is not supported");
  const int64_t q_row = call.n_head * call.kv.head_dim_k;
  const int64_t out_row = call.n_head * call.kv.head_dim_v;
  // Dense path: these queries see at most top_k positions, so the indexer chose them all and
  // the attention is exactly the ordinary causal one.
  int64_t dense = 0;
  while (dense < call.n_tokens && keys.everything[size_t(row0 + dense)] != 0) ++dense;
  if (dense > 0) {
    AttentionCall head = call;
    head.n_tokens = dense;
    backend.attention(head);
  }
  if (dense == call.n_tokens) return;
  // Sparse path: every later row (a row that sees more than top_k positions is followed only by
  // such rows) reads its top_k chosen cells.
  AttentionCall rest = call;
  rest.q = call.q + dense * q_row;
  rest.out = call.out + dense * out_row;
  rest.n_tokens = call.n_tokens - dense;
  rest.pos0 = call.pos0 + dense;
  backend.attention_selected(rest, keys.positions.data() + (row0 + dense) * keys.top_k, keys.top_k);
}

}  // namespace sluice::model
