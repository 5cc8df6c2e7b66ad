// Attention restricted to chosen keys: DeepSeek sparse attention (DSA), where an indexer picks
// the top_k cached positions each query attends to (blocks/dsa_indexer). A query that sees at
// most top_k positions has everything chosen and takes the backend's ordinary dense attention,
// unchanged; any other query attends to its chosen cells alone, gathered in ascending position
// order, which is what llama.cpp's −∞ mask on the others computes (a masked key adds nothing to
// the softmax or to the values). Knows no architecture.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace sluice::model {

// The positions each query row of a chunk attends to. Row r attends to every position up to its
// own when everything[r] (the dense path), else to positions[r * top_k ..+ top_k], ascending
// (the sparse path).
struct KeySelection {
  int64_t top_k = 0;
  std::vector<int32_t> positions;   // [n_batch, top_k]
  std::vector<uint8_t> everything;  // [n_batch]
  std::vector<uint8_t> gathered_k;  // scratch: one row's chosen key cells
  std::vector<uint8_t> gathered_v;  // scratch: one row's chosen value cells
  void reserve(int64_t n_batch, int64_t top_k_);
};

// Backend::attention of one sequence run (`call`: its q, out, n_tokens, pos0 and cache layer;
// no sliding window), row t of the run reading the selection's row row0 + t. The rows that see
// every key form a prefix of the run and attend densely in one call; each later row attends to
// its gathered top_k cells in a call of its own.
void attend_selected(Backend& backend, const AttentionCall& call, KeySelection& keys, int64_t row0);

}  // namespace sluice::model
