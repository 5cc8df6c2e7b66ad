// AVX2 dot product of an FP8 block-scaled row (E4M3 bytes, a float32 scale per block of
// columns) with float32 activations. E4M3 decodes exactly by moving its bits into an IEEE half
// (vcvtph2ps widens it), FMAs accumulate each block in four 8-lane sums, and each block's lanes
// are scaled into an 8-lane row sum; one horizontal add ends the row. Differs from the reference
// (quant/dot_reference.h) only in summation order and in FMA's unrounded products.
#include "backend/cpu/avx2_util.h"
#include "backend/cpu/vec_dot_table.h"

namespace sluice::cpu {
namespace {

// 16 E4M3 bytes -> 16 IEEE halves of value / 256: the sign to bit 15, the seven exponent and
// mantissa bits to bits 13..7, so the E4M3 exponent becomes the low four bits of the half's and
// the bias moves from 7 to 15 (the 2^-8, undone once per block). E4M3 subnormals land on half
// subnormals, which vcvtph2ps widens exactly. The NaN code 0x7F reads as 1.875 * 2^8 here, so
// callers look for NaN codes apart.
__m256i e4m3_to_halves(__m128i bytes) {
  const __m256i wide = _mm256_cvtepi8_epi16(bytes);  // the sign bit copied into bits 8..15
  return _mm256_and_si256(_mm256_slli_epi16(wide, 7), _mm256_set1_epi16(int16_t(0xbf80)));
}

// 0xff in each byte that is an E4M3 NaN code (0x7F or 0xFF).
__m256i nan_codes_of(__m256i bytes) {
  const __m256i low7 = _mm256_set1_epi8(0x7f);
  return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, low7), low7);
}

// Sum of decode(w[i]) / 256 * x[i] over one block, i < len, as 8 lane sums. NaN codes are OR-ed
// into `nan_codes`.
__m256 block_lanes(const uint8_t* w /*[len]*/, const float* x /*[len]*/, int64_t len,
                   __m256i& nan_codes) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= len; i += 32) {
    const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i));
    nan_codes = _mm256_or_si256(nan_codes, nan_codes_of(bytes));
    const __m256i low = e4m3_to_halves(_mm256_castsi256_si128(bytes));        // elements 0..15
    const __m256i high = e4m3_to_halves(_mm256_extracti128_si256(bytes, 1));  // 16..31
    const __m256 w0 = _mm256_cvtph_ps(_mm256_castsi256_si128(low));
    const __m256 w1 = _mm256_cvtph_ps(_mm256_extracti128_si256(low, 1));
    const __m256 w2 = _mm256_cvtph_ps(_mm256_castsi256_si128(high));
    const __m256 w3 = _mm256_cvtph_ps(_mm256_extracti128_si256(high, 1));
    acc[0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i), acc[0]);
    acc[1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i + 8), acc[1]);
    acc[2] = _mm256_fmadd_ps(w2, _mm256_loadu_ps(x + i + 16), acc[2]);
    acc[3] = _mm256_fmadd_ps(w3, _mm256_loadu_ps(x + i + 24), acc[3]);
  }
  // The rest, 8 at a time; a last step of fewer than 8 reads zero-padded copies (a zero weight
  // times a zero activation adds an exact zero) so nothing past the row is touched.
  for (; i < len; i += 8) {
    const int64_t k = len - i < 8 ? len - i : 8;
    uint8_t w_pad[8] = {};
    float x_pad[8] = {};
    const uint8_t* w_at = w + i;
    const float* x_at = x + i;
    if (k < 8) {
      std::memcpy(w_pad, w_at, size_t(k));
      std::memcpy(x_pad, x_at, size_t(k) * sizeof(float));
      w_at = w_pad;
      x_at = x_pad;
    }
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(w_at));  // high 8: 0
    nan_codes = _mm256_or_si256(nan_codes, nan_codes_of(_mm256_zextsi128_si256(bytes)));
    const __m256 w0 = _mm256_cvtph_ps(_mm256_castsi256_si128(e4m3_to_halves(bytes)));
    acc[0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x_at), acc[0]);
  }
  return _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
}

}  // namespace

float vec_dot_fp8_e4m3_avx2(const uint8_t* w_row, const float* block_scales, const float* x,
                            int64_t n, int64_t block) {
  __m256 row = _mm256_setzero_ps();
  __m256i nan_codes = _mm256_setzero_si256();
  const __m256 undo_bias = _mm256_set1_ps(256.0f);  // exact: a power of two
  for (int64_t lo = 0, b = 0; lo < n; lo += block, ++b) {
    const int64_t len = n - lo < block ? n - lo : block;
    const __m256 lanes = _mm256_mul_ps(block_lanes(w_row + lo, x + lo, len, nan_codes), undo_bias);
    row = _mm256_fmadd_ps(lanes, _mm256_set1_ps(block_scales[b]), row);
  }
  // The half trick reads NaN codes as numbers; the reference's NaN * x makes the row NaN.
  if (!_mm256_testz_si256(nan_codes, nan_codes)) return __builtin_nanf("");
  return hsum_ps(row);
}

}  // namespace sluice::cpu
