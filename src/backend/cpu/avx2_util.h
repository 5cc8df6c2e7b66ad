// Small AVX2 building blocks shared by the vec_dot_*_avx2.cpp kernels: horizontal sums, the
// int8 x int8 product that maddubs cannot do directly, nibble and bit unpacking.
// Include ONLY from *_avx2.cpp / *_avx512.cpp files. Everything sits in an unnamed namespace so
// each file has its own copy: an inline function compiled with AVX2 flags must never be the
// copy the linker keeps for baseline code (nor an AVX-512 one for AVX2 code).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace sluice::cpu {
namespace {  // NOLINT(cert-dcl59-cpp, google-build-namespaces): per-file copies, see above

// f(std::integral_constant<int, n>{}) for n = n_x in 1..4: the scaled kernels take their row
// count as a template argument, so that their accumulators stay in registers.
template <class F>
inline void with_row_count(int64_t n_x, F&& f) {
  switch (n_x) {
    case 4:
      return f(std::integral_constant<int, 4>{});
    case 3:
      return f(std::integral_constant<int, 3>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    default:
      return f(std::integral_constant<int, 1>{});
  }
}

inline float hsum_ps(__m256 v) {
  __m128 sum = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
  sum = _mm_add_ss(sum, _mm_movehdup_ps(sum));
  return _mm_cvtss_f32(sum);
}

inline int hsum_epi32(__m256i v) {
  __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0x4e));
  sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0xb1));
  return _mm_cvtsi128_si32(sum);
}

inline float half_to_float(uint16_t h) {
  return _cvtsh_ss(h);
}

// Pairwise int16 sums of u8 * s8 products, widened to 8 int32 lanes. maddubs saturates at
// int16, which the operand ranges used here (|u| <= 127 or u <= 63) never reach.
inline __m256i madd_u8_s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// s8 * s8 through maddubs: move a's sign onto b so a can be read unsigned. Needs b != -128,
// which the activation quantizers guarantee (they clamp to +-127).
inline __m256i madd_s8_s8(__m256i a, __m256i b) {
  return madd_u8_s8(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

// As above, stopping at the 16 int16 pair sums (for per-16 scales applied with madd).
inline __m256i maddubs_s8_s8(__m256i a, __m256i b) {
  return _mm256_maddubs_epi16(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

// 16 bytes of nibbles -> 32 bytes: low nibbles are elements 0..15, high nibbles 16..31.
inline __m256i unpack_nibbles(const uint8_t* bytes /*[16]*/) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

// 32 bits -> 32 bytes, 0xff where bit j is set.
inline __m256i expand_bits(const uint8_t* bits /*[4]*/) {
  uint32_t word;
  std::memcpy(&word, bits, sizeof(word));
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(int(word)),
                          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                           2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

// The 32 signed weights of a Q4_0 block (nibble - 8, -8..7) from its qs.
inline __m256i q4_0_weights(const uint8_t* qs /*[16]*/) {
  return _mm256_sub_epi8(unpack_nibbles(qs), _mm256_set1_epi8(8));
}

// The 32 signed weights of a Q5_0 block from its qs and qh: a clear fifth bit means value - 16,
// i.e. 0xf0 OR-ed onto the nibble (two's complement).
inline __m256i q5_0_weights(const uint8_t* qs /*[16]*/, const uint8_t* qh /*[4]*/) {
  const __m256i clear_high =
      _mm256_andnot_si256(expand_bits(qh), _mm256_set1_epi8(static_cast<char>(0xf0)));
  return _mm256_or_si256(unpack_nibbles(qs), clear_high);
}

// Per byte: bit `shift` of each byte of v, moved to bit 0 (srli_epi16 leaks bits across the
// byte boundary only into positions the mask clears).
inline __m256i byte_bit(__m256i v, int shift) {
  return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(1));
}

inline __m256i loadu256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// The 6-bit scales and minimums of a Q4_K / Q5_K super-block (its 12 packed bytes), unpacked four
// at a time in 32-bit words: byte j of `scales` / `mins` is scale / minimum j, as the
// reference's one-by-one unpacking gives them.
struct K4Scales {
  uint64_t scales, mins;
};
inline K4Scales unpack_k4_scales(const uint8_t* packed /*[12]*/) {
  uint32_t a, b, c;  // a: scales 0..3 and the top bits of 4..7; b: the same for the minimums
  std::memcpy(&a, packed, 4);
  std::memcpy(&b, packed + 4, 4);
  std::memcpy(&c, packed + 8, 4);  // low nibbles: scales 4..7, high nibbles: minimums 4..7
  const uint32_t scales_high = (c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u);
  const uint32_t mins_high = ((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u);
  return {(a & 0x3f3f3f3fu) | uint64_t(scales_high) << 32, (b & 0x3f3f3f3fu) | uint64_t(mins_high)
                                                                                   << 32};
}

// The 8 minimums (bytes of `mins`), each repeated for its sub-block's two bsums, as 16 int16.
inline __m256i mins_per_bsum(uint64_t mins) {
  const __m128i twice =
      _mm_shuffle_epi8(_mm_cvtsi64_si128(int64_t(mins)),
                       _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7));
  return _mm256_cvtepu8_epi16(twice);
}

}  // namespace
}  // namespace sluice::cpu
