// softmax_row in ggml's order of operations.
#include "backend/cpu/softmax.h"

#include <cmath>

#include "backend/cpu/exp_polynomial.h"

namespace sluice::cpu {

void softmax_row(float* x, int64_t n) {
  float max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max = std::fmax(max, x[i]);
  double sum = 0.0;
  int64_t i = 0;
  for (; i + 7 < n; i += 8) {
    float e[8];
    for (int j = 0; j < 8; ++j) {
      e[j] = exp_polynomial(x[i + j] - max);
      x[i + j] = e[j];
    }
    // ggml's horizontal add of the eight lanes: halves, then pairs, then the last two.
    const float a0 = e[0] + e[4], a1 = e[1] + e[5], a2 = e[2] + e[6], a3 = e[3] + e[7];
    sum += double((a0 + a2) + (a1 + a3));
  }
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += double(x[i]);
  }
  const float inv = float(1.0 / sum);
  for (int64_t k = 0; k < n; ++k) x[k] *= inv;
}

}  // namespace sluice::cpu
