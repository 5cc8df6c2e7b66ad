// ResidualStream: the three buffers every decoder's forward works in — the residual stream, the
// normed input of a branch and a branch's output — sized for the largest chunk a session asked
// for. Knows nothing of layers or weights.
#pragma once

#include <cstdint>
#include <vector>

namespace sluice::model {

struct ResidualStream {
  std::vector<float> x;       // [n_batch, n_embd] the residual stream
  std::vector<float> xn;      // [n_batch, n_embd] normed input of a branch
  std::vector<float> branch;  // [n_batch, n_embd] attention or FFN output
  int64_t n_batch = 0;

  // Grows the buffers to n_batch rows; false when they already hold that many (so the decoder's
  // other scratch is large enough too).
  bool grow(int64_t rows, int64_t n_embd) {
    if (rows <= n_batch) return false;
    n_batch = rows;
    for (std::vector<float>* buffer : {&x, &xn, &branch}) buffer->resize(size_t(rows * n_embd));
    return true;
  }
};

}  // namespace sluice::model
