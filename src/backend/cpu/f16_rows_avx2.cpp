// AVX2/F16C versions of the half-row kernels in f16_rows.h (built with -mavx2 -mfma -mf16c;
// called only after isa_supported(kAvx2)). Conversions round to nearest even, as core/half.h.
#include <immintrin.h>

#include "backend/cpu/f16_rows.h"

namespace sluice::cpu {
namespace {

__m256 load_half8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

void store_half8(uint16_t* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

float half_to_float(uint16_t h) {
  return _cvtsh_ss(h);
}

uint16_t float_to_half(float f) {
  return uint16_t(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

}  // namespace

void fp32_to_fp16_row_avx2(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store_half8(y + i, _mm256_loadu_ps(x + i));
  for (; i < n; ++i) y[i] = float_to_half(x[i]);
}

float dot_f16_avx2(const uint16_t* a, const uint16_t* b, int64_t n) {
  __m256 sum[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  const int64_t n32 = n & ~int64_t(31);
  for (int64_t i = 0; i < n32; i += 32) {
    for (int j = 0; j < 4; ++j) {
      sum[j] = _mm256_fmadd_ps(load_half8(a + i + 8 * j), load_half8(b + i + 8 * j), sum[j]);
    }
  }
  sum[0] = _mm256_add_ps(sum[0], sum[2]);
  sum[1] = _mm256_add_ps(sum[1], sum[3]);
  sum[0] = _mm256_add_ps(sum[0], sum[1]);
  const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(sum[0]), _mm256_extractf128_ps(sum[0], 1));
  const __m128 t1 = _mm_hadd_ps(t0, t0);
  double total = _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
  for (int64_t i = n32; i < n; ++i) total += double(half_to_float(a[i]) * half_to_float(b[i]));
  return float(total);
}

void mad_f16_avx2(uint16_t* y, const uint16_t* x, float v, int64_t n) {
  const __m256 vv = _mm256_set1_ps(v);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    store_half8(y + i, _mm256_fmadd_ps(load_half8(x + i), vv, load_half8(y + i)));
  }
  for (; i < n; ++i) y[i] = float_to_half(half_to_float(x[i]) * v + half_to_float(y[i]));
}

void scale_f16_avx2(uint16_t* y, float v, int64_t n) {
  const __m256 vv = _mm256_set1_ps(v);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store_half8(y + i, _mm256_mul_ps(load_half8(y + i), vv));
  for (; i < n; ++i) y[i] = float_to_half(half_to_float(y[i]) * v);
}

}  // namespace sluice::cpu
