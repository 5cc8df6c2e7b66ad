// F16C/AVX2 versions of the half-row helpers in f16_rows.h (built with -mavx2 -mf16c; called
// only after isa_supported(kAvx2)). _mm256_cvtps_ph with round-to-nearest-even gives the same
// halves as core/half.h's fp32_to_fp16.
#include <immintrin.h>

#include "backend/cpu/f16_rows.h"

namespace sluice::cpu {

void fp32_to_fp16_row_avx2(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
  }
  for (; i < n; ++i) y[i] = uint16_t(_cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT));
}

void axpy_f16_avx2(float a, const uint16_t* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 vx = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, vx, _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += a * _cvtsh_ss(x[i]);
}

}  // namespace sluice::cpu
