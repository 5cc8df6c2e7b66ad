// swiglu_rows with AVX2 (silu.h): each row's groups of eight in one register, e^x by
// exp_polynomial8; lane for lane the scalar loop's operations (0 - g, e^x, 1 + e, g / that, times
// up), so the same bits. The rest of a row is the scalar loop's, with libm's expf.
#include <immintrin.h>

#include <cmath>

#include "backend/cpu/exp_polynomial_avx2.h"
#include "backend/cpu/silu.h"

namespace sluice::cpu {

void swiglu_rows_avx2(float* gate, const float* up, int64_t n_rows, int64_t n_cols) {
  const int64_t n_vector = n_cols & ~int64_t(7);
  const __m256 one = _mm256_set1_ps(1.0f);
  for (int64_t r = 0; r < n_rows; ++r) {
    float* g = gate + r * n_cols;
    const float* u = up + r * n_cols;
    for (int64_t i = 0; i < n_vector; i += 8) {
      const __m256 x = _mm256_loadu_ps(g + i);
      const __m256 e = exp_polynomial8(_mm256_sub_ps(_mm256_setzero_ps(), x));
      const __m256 silu = _mm256_div_ps(x, _mm256_add_ps(one, e));
      _mm256_storeu_ps(g + i, _mm256_mul_ps(silu, _mm256_loadu_ps(u + i)));
    }
    for (int64_t i = n_vector; i < n_cols; ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  }
}

}  // namespace sluice::cpu
