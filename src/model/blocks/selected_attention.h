// Attention restricted to chosen keys: DeepSeek sparse attention (DSA), where an indexer picks
// the top_k cached positions each query attends to (blocks/dsa_indexer). A query that sees at
// most top_k positions has everything chosen and takes the backend's ordinary dense attention,
// unchanged; any other query attends to its chosen cells alone, gathered in ascending position
// order, which is what llama.cpp's −∞ mask on the others computes (a masked key adds nothing to
// the softmax or to the values). The choice lives in backend memory (the indexer's top-k op
// writes it there); which rows see everything depends only on positions, so the host knows it.
// Knows no architecture.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_array.h"

namespace sluice::model {

// The positions each query row of a chunk attends to. Row r attends to every position up to its
// own when everything[r] (the dense path), else to positions[r * top_k ..+ top_k], ascending
// (the sparse path).
struct KeySelection {
  int64_t top_k = 0;
  BackendArray<int32_t> positions;  // [n_batch, top_k] backend memory (Backend::top_k_positions)
  std::vector<uint8_t> everything;  // [n_batch] host
  void reserve(Backend& backend, int64_t n_batch, int64_t top_k_);
};

// Backend::attention of one sequence run (`call`: its q, out, n_tokens, pos0 and cache layer;
// no sliding window), row t of the run reading the selection's row row0 + t. The rows that see
// every key form a prefix of the run and attend densely in one call; the later rows attend to
// their top_k cells in one Backend::attention_selected.
void attend_selected(Backend& backend, const AttentionCall& call, KeySelection& keys, int64_t row0);

}  // namespace sluice::model
