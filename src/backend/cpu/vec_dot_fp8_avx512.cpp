// AVX-512 dot product of an FP8 block-scaled row (E4M3 bytes, a float32 scale per block of
// columns) with float32 activations: the AVX2 kernel's half trick on 64 bytes a step, four
// 16-lane FMA sums per block, masked loads for a block's tail (no padding copies), and a
// 64-bit mask collecting NaN codes. Differs from the reference only in summation order and
// FMA's unrounded products.
#include "backend/cpu/avx512_util.h"  // first: see its note on GCC 12
#include "backend/cpu/vec_dot_table.h"

namespace sluice::cpu {
namespace {

// 32 E4M3 bytes -> 32 IEEE halves of value / 256 (see vec_dot_fp8_avx2.cpp: sign to bit 15,
// exponent and mantissa to bits 13..7; the NaN code reads as a number and is caught apart).
__m512i e4m3_to_halves(__m256i bytes) {
  const __m512i wide = _mm512_cvtepi8_epi16(bytes);  // the sign bit copied into bits 8..15
  return _mm512_and_si512(_mm512_slli_epi16(wide, 7), _mm512_set1_epi16(int16_t(0xbf80)));
}

// 16 E4M3 bytes -> 16 halves, for tails.
__m256i e4m3_to_halves16(__m128i bytes) {
  const __m256i wide = _mm256_cvtepi8_epi16(bytes);
  return _mm256_and_si256(_mm256_slli_epi16(wide, 7), _mm256_set1_epi16(int16_t(0xbf80)));
}

// Sum of decode(w[i]) / 256 * x[i] over one block, i < len, as 16 lane sums. A set bit in
// `nan_codes` marks an E4M3 NaN code seen.
__m512 block_lanes(const uint8_t* w /*[len]*/, const float* x /*[len]*/, int64_t len,
                   __mmask64& nan_codes) {
  const __m512i low7 = _mm512_set1_epi8(0x7f);
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
  int64_t i = 0;
  for (; i + 64 <= len; i += 64) {
    const __m512i bytes = loadu512(w + i);
    nan_codes |= _mm512_cmpeq_epi8_mask(_mm512_and_si512(bytes, low7), low7);
    const __m512i low = e4m3_to_halves(_mm512_castsi512_si256(bytes));         // elements 0..31
    const __m512i high = e4m3_to_halves(_mm512_extracti64x4_epi64(bytes, 1));  // 32..63
    const __m512 w0 = _mm512_cvtph_ps(_mm512_castsi512_si256(low));
    const __m512 w1 = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(low, 1));
    const __m512 w2 = _mm512_cvtph_ps(_mm512_castsi512_si256(high));
    const __m512 w3 = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(high, 1));
    acc[0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + i), acc[0]);
    acc[1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + i + 16), acc[1]);
    acc[2] = _mm512_fmadd_ps(w2, _mm512_loadu_ps(x + i + 32), acc[2]);
    acc[3] = _mm512_fmadd_ps(w3, _mm512_loadu_ps(x + i + 48), acc[3]);
  }
  // The rest, 16 at a time; masked loads read zeros past the block (and never fault there).
  const __m128i low7_16 = _mm_set1_epi8(0x7f);
  for (; i < len; i += 16) {
    const int64_t k = len - i < 16 ? len - i : 16;
    const __mmask16 lanes = __mmask16((1u << k) - 1u);
    const __m128i bytes = _mm_maskz_loadu_epi8(lanes, w + i);
    nan_codes |= __mmask64(_mm_cmpeq_epi8_mask(_mm_and_si128(bytes, low7_16), low7_16));
    const __m512 w0 = _mm512_cvtph_ps(e4m3_to_halves16(bytes));
    acc[0] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(lanes, x + i), acc[0]);
  }
  return _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
}

}  // namespace

float vec_dot_fp8_e4m3_avx512(const uint8_t* w_row, const float* block_scales, const float* x,
                              int64_t n, int64_t block) {
  __m512 row = _mm512_setzero_ps();
  __mmask64 nan_codes = 0;
  const __m512 undo_bias = _mm512_set1_ps(256.0f);  // exact: a power of two
  for (int64_t lo = 0, b = 0; lo < n; lo += block, ++b) {
    const int64_t len = n - lo < block ? n - lo : block;
    const __m512 lanes = _mm512_mul_ps(block_lanes(w_row + lo, x + lo, len, nan_codes), undo_bias);
    row = _mm512_fmadd_ps(lanes, _mm512_set1_ps(block_scales[b]), row);
  }
  // The half trick reads NaN codes as numbers; the reference's NaN * x makes the row NaN.
  if (nan_codes != 0) return __builtin_nanf("");
  return _mm512_reduce_add_ps(row);
}

}  // namespace sluice::cpu
