// AVX-512 dot products of Q4_K, Q5_K and Q6_K against Q8_K: 64 weights per 512-bit register
// (two or four sub-blocks), maddubs to int16 pair sums, madd against a per-lane scale vector,
// one float FMA per super-block. Minimums and Q6_K's -32 go through Q8_K's bsums with 256-bit
// code. The other K and IQ types use the AVX2 kernels (see backend/README.md).
#include "backend/cpu/avx2_util.h"
#include "backend/cpu/avx512_util.h"  // first: see its note on GCC 12
#include "backend/cpu/vec_dot_table.h"
#include "quant/blocks.h"

namespace sluice::cpu {
namespace {

// sum over sub-blocks of 32 of min * (its two bsums), as 8 int32 partial sums.
__m256i mins_dot(const BlockQ8_K& x, uint64_t mins) {
  return _mm256_madd_epi16(loadu256(x.bsums), mins_per_bsum(mins));
}

// The scales of two 64-element steps j and j + 1 as int16 pairs per int32 lane: lanes 0..7 (the
// low nibbles) (scale 2j, scale 2j + 2), lanes 8..15 (the high nibbles) (2j + 1, 2j + 3).
// Returns the pairs of steps 0-1 and 2-3.
void scale_pairs(uint64_t scales, __m512i* steps01, __m512i* steps23) {
  const int8_t z = -1;  // pshufb: a zero byte
  const __m128i words =
      _mm_shuffle_epi8(_mm_cvtsi64_si128(int64_t(scales)),
                       _mm_setr_epi8(0, z, 2, z, 1, z, 3, z, 4, z, 6, z, 5, z, 7, z));
  const __m512i all = _mm512_castsi128_si512(words);
  *steps01 = _mm512_permutexvar_epi32(
      _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1), all);
  *steps23 = _mm512_permutexvar_epi32(
      _mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3), all);
}

// Q4_K / Q5_K super-block: `qh` is nullptr for Q4_K. Lane k of the integer sums holds, for every
// 64-element step j, scale(2j) * (4 products of low nibbles 4k..4k+3) for k < 8 and
// scale(2j + 1) * (the high nibbles' 4 products) for k >= 8 — the lanes maddubs + madd gave, so
// the float steps after them round alike. Here VNNI's dpbusd makes each step's 4-product sums
// (at most 4 * 31 * 127, an int16), two steps share a 16-bit lane pair, and one madd applies
// both steps' scales.
void dot_q45_k(const uint8_t* qs, const uint8_t* qh, const uint8_t* packed_scales, float d,
               float dmin, const BlockQ8_K& xb, __m512* acc, __m256* acc_min) {
  const K4Scales unpacked = unpack_k4_scales(packed_scales);
  __m512i pair_scales[2];
  scale_pairs(unpacked.scales, &pair_scales[0], &pair_scales[1]);
  const __m512i low_nibble = _mm512_set1_epi8(0x0f);
  const __m256i high_bits = qh != nullptr ? loadu256(qh) : _mm256_setzero_si256();
  const auto step_sums = [&](int j) {  // 64 elements: 32 low nibbles, then 32 high nibbles
    const __m256i q4 = loadu256(qs + 32 * j);
    __m512i q = _mm512_and_si512(pair256(q4, _mm256_srli_epi16(q4, 4)), low_nibble);
    if (qh != nullptr) {
      const __m512i fifth = pair256(byte_bit(high_bits, 2 * j), byte_bit(high_bits, 2 * j + 1));
      q = _mm512_or_si512(q, _mm512_slli_epi16(fifth, 4));
    }
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, loadu512(xb.qs + 64 * j));
  };
  __m512i sumi = _mm512_setzero_si512();
  for (int pair = 0; pair < 2; ++pair) {
    const __m512i both = _mm512_mask_blend_epi16(__mmask32(0xaaaaaaaau), step_sums(2 * pair),
                                                 _mm512_slli_epi32(step_sums(2 * pair + 1), 16));
    sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(both, pair_scales[pair]));
  }
  *acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), *acc);
  *acc_min = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(mins_dot(xb, unpacked.mins)),
                             *acc_min);
}

float dot_q4_k(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ4_K*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);  // [n / 256]
  __m512 acc = _mm512_setzero_ps();
  __m256 acc_min = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    dot_q45_k(wb[i].qs, nullptr, wb[i].scales, half_to_float(wb[i].d) * xb[i].d,
              half_to_float(wb[i].dmin) * xb[i].d, xb[i], &acc, &acc_min);
  }
  return _mm512_reduce_add_ps(acc) - hsum_ps(acc_min);
}

float dot_q5_k(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ5_K*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);  // [n / 256]
  __m512 acc = _mm512_setzero_ps();
  __m256 acc_min = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    dot_q45_k(wb[i].qs, wb[i].qh, wb[i].scales, half_to_float(wb[i].d) * xb[i].d,
              half_to_float(wb[i].dmin) * xb[i].d, xb[i], &acc, &acc_min);
  }
  return _mm512_reduce_add_ps(acc) - hsum_ps(acc_min);
}

// Per-lane int16 scales for 64 elements = sub-blocks 4g .. 4g+3 of 16: bytes 8k..8k+7 of the
// shuffled vector are scale 4g + k.
__m512i scale_quad16(__m128i scales8, int g) {
  const int64_t spread = 0x0101010101010101LL;
  const __m256i index = _mm256_set_epi64x((4 * g + 3) * spread, (4 * g + 2) * spread,
                                          (4 * g + 1) * spread, 4 * g * spread);
  const __m256i both = _mm256_broadcastsi128_si256(scales8);
  // vpshufb indexes within each 128-bit lane; both lanes hold all 16 scales.
  return _mm512_cvtepi8_epi16(_mm256_shuffle_epi8(both, index));
}

float dot_q6_k(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ6_K*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);  // [n / 256]
  const __m512i low_nibble = _mm512_set1_epi8(0x0f);
  const __m512i two_bits = _mm512_set1_epi8(3);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const __m128i scales8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[i].scales));
    const __m256i offset = _mm256_madd_epi16(loadu256(xb[i].bsums), _mm256_cvtepi8_epi16(scales8));
    __m512i sumi = _mm512_setzero_si512();
    for (int half = 0; half < 2; ++half) {
      const __m512i ql = loadu512(wb[i].ql + 64 * half);  // elements 0..63 low, 64..127 high
      const __m256i qh = loadu256(wb[i].qh + 32 * half);
      const __m512i qh2 = pair256(qh, _mm256_srli_epi16(qh, 2));
      const __m512i first = _mm512_or_si512(_mm512_and_si512(ql, low_nibble),
                                            _mm512_slli_epi16(_mm512_and_si512(qh2, two_bits), 4));
      const __m512i second = _mm512_or_si512(
          _mm512_and_si512(_mm512_srli_epi16(ql, 4), low_nibble),
          _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh2, 4), two_bits), 4));
      const int8_t* q8 = xb[i].qs + 128 * half;
      const __m512i p0 = _mm512_madd_epi16(_mm512_maddubs_epi16(first, loadu512(q8)),
                                           scale_quad16(scales8, 2 * half));
      const __m512i p1 = _mm512_madd_epi16(_mm512_maddubs_epi16(second, loadu512(q8 + 64)),
                                           scale_quad16(scales8, 2 * half + 1));
      sumi = _mm512_add_epi32(sumi, _mm512_add_epi32(p0, p1));
    }
    const float d = half_to_float(wb[i].d) * xb[i].d;
    acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
    // The -32 of every value: 32 * sum(scale * bsum), folded in as a float term.
    acc = _mm512_fmadd_ps(_mm512_set1_ps(-32.0f * d),
                          _mm512_zextps256_ps512(_mm256_cvtepi32_ps(offset)), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

}  // namespace

void add_avx512_kquant_kernels(VecDotTable& table) {
  table.kernels[int(QType::Q4_K)] = {dot_q4_k, CpuIsa::kAvx512};
  table.kernels[int(QType::Q5_K)] = {dot_q5_k, CpuIsa::kAvx512};
  table.kernels[int(QType::Q6_K)] = {dot_q6_k, CpuIsa::kAvx512};
}

}  // namespace sluice::cpu
