// AVX-512 building blocks for the vec_dot_*_avx512.cpp kernels (F, BW, VL and VNNI): the
// signed int8 product through VNNI's u8 x s8 dpbusd, and pairing two 256-bit halves.
// Include ONLY from *_avx512.cpp files; an unnamed namespace gives each file its own copy so
// no AVX-512 code can stand in for a baseline or AVX2 inline function at link time.
#pragma once

// GCC 12 reports the _mm512_undefined_* placeholders inside its own AVX-512 intrinsics as
// uninitialized (GCC bug 105593, fixed in 13). The pragma must precede the first include of
// immintrin.h in the file, so every *_avx512.cpp includes this header first.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <cstdint>

namespace sluice::cpu {
namespace {  // NOLINT(cert-dcl59-cpp, google-build-namespaces): per-file copies, see above

inline __m512i pair256(__m256i low, __m256i high) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
}

inline __m512i loadu512(const void* p) {
  return _mm512_loadu_si512(p);
}

// Sums of 4 consecutive s8 x s8 products per int32 lane. dpbusd wants its first operand
// unsigned, so a's sign moves onto b (AVX-512 has no vpsignb: a masked negate does it).
// Needs b != -128, which the activation quantizers guarantee.
inline __m512i dot4_s8_s8(__m512i a, __m512i b) {
  const __m512i b_signed =
      _mm512_mask_sub_epi8(b, _mm512_movepi8_mask(a), _mm512_setzero_si512(), b);
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(a), b_signed);
}

// Scale vector whose low 8 lanes are `low` and high 8 lanes `high` (two blocks per register).
inline __m512 two_scales(float low, float high) {
  return _mm512_mask_blend_ps(__mmask16(0xff00), _mm512_set1_ps(low), _mm512_set1_ps(high));
}

}  // namespace
}  // namespace sluice::cpu
