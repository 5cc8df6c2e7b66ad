// AVX2 dot products of the 256-element super-block types against Q8_K: Q2_K, Q3_K, Q4_K,
// Q5_K, Q6_K and IQ4_XS. Inside a super-block everything stays integer: maddubs forms int16
// pair sums, madd applies the sub-block scale; one float FMA per super-block applies d.
// Offsets (Q3_K's -4, Q6_K's -32) and minimums are folded in through Q8_K's bsums.
#include "backend/cpu/avx2_util.h"
#include "backend/cpu/vec_dot_table.h"
#include "quant/blocks.h"
#include "quant/iq_tables.h"

namespace sluice::cpu {
namespace {

// No vector constants at namespace scope: their initializers would run AVX2 code at startup.
inline __m256i low_nibble_mask() {
  return _mm256_set1_epi8(0x0f);
}

// Eight int16 copies of byte 2c of `scales8`, then eight of byte 2c+1: the scales of the two
// 16-element sub-blocks a 32-byte chunk c covers, lined up with maddubs' 16 pair sums.
__m256i scale_pair16(__m128i scales8, int c) {
  const int64_t spread = 0x0101010101010101LL;
  const __m128i index = _mm_set_epi64x((2 * c + 1) * spread, 2 * c * spread);
  return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales8, index));
}

// sum_j bsums[j] * scale16[j] over the 16 sub-blocks, as 8 int32 partial sums.
__m256i bsums_dot(const BlockQ8_K& x, __m256i scale16) {
  return _mm256_madd_epi16(loadu256(x.bsums), scale16);
}

float dot_q2_k(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ2_K*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);  // [n / 256]
  __m256 acc = _mm256_setzero_ps();
  __m256 acc_min = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[i].scales));
    const __m128i scales8 = _mm_and_si128(packed, _mm_set1_epi8(0x0f));
    const __m128i mins8 = _mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0x0f));
    const __m256i mins_dot = bsums_dot(xb[i], _mm256_cvtepu8_epi16(mins8));
    __m256i sumi = _mm256_setzero_si256();
    for (int half = 0; half < 2; ++half) {
      const __m256i q2 = loadu256(wb[i].qs + 32 * half);
      for (int shift = 0; shift < 4; ++shift) {
        const int c = 4 * half + shift;  // 32-element chunk
        const __m256i q = _mm256_and_si256(_mm256_srli_epi16(q2, 2 * shift), _mm256_set1_epi8(3));
        const __m256i pairs = _mm256_maddubs_epi16(q, loadu256(xb[i].qs + 32 * c));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(pairs, scale_pair16(scales8, c)));
      }
    }
    const float dall = xb[i].d * half_to_float(wb[i].d);
    const float dmin = xb[i].d * half_to_float(wb[i].dmin);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(dall), _mm256_cvtepi32_ps(sumi), acc);
    acc_min = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(mins_dot), acc_min);
  }
  return hsum_ps(acc) - hsum_ps(acc_min);
}

// Q3_K's 16 6-bit scales minus 32, as bytes: scale j is the low nibble of byte j (j < 8) or the
// high nibble of byte j - 8, with bits 2 (j / 4), 2 (j / 4) + 1 of byte 8 + j % 4 on top —
// unpacked four at a time in 32-bit words.
__m128i unpack_q3_k_scales(const uint8_t* packed /*[12]*/) {
  uint32_t a, b, c;
  std::memcpy(&a, packed, 4);
  std::memcpy(&b, packed + 4, 4);
  std::memcpy(&c, packed + 8, 4);
  const uint32_t nibbles = 0x0f0f0f0fu, top = 0x30303030u;
  const __m128i unsigned_scales = _mm_setr_epi32(
      int((a & nibbles) | ((c << 4) & top)), int((b & nibbles) | ((c << 2) & top)),
      int(((a >> 4) & nibbles) | (c & top)), int(((b >> 4) & nibbles) | ((c >> 2) & top)));
  return _mm_sub_epi8(unsigned_scales, _mm_set1_epi8(32));
}

// Q3_K values are u - 4 with u = low2 | high << 2 in 0..7: sum u*q8 by maddubs, and the -4
// becomes 4 * sum(scale * bsum).
float dot_q3_k(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ3_K*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);  // [n / 256]
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const __m128i scales8 = unpack_q3_k_scales(wb[i].scales);
    const __m256i offset = bsums_dot(xb[i], _mm256_cvtepi8_epi16(scales8));
    const __m256i hmask = loadu256(wb[i].hmask);
    __m256i sumi = _mm256_setzero_si256();
    for (int half = 0; half < 2; ++half) {
      const __m256i q3 = loadu256(wb[i].qs + 32 * half);
      for (int shift = 0; shift < 4; ++shift) {
        const int c = 4 * half + shift;
        const __m256i low = _mm256_and_si256(_mm256_srli_epi16(q3, 2 * shift), _mm256_set1_epi8(3));
        const __m256i q = _mm256_or_si256(low, _mm256_slli_epi16(byte_bit(hmask, c), 2));
        const __m256i pairs = _mm256_maddubs_epi16(q, loadu256(xb[i].qs + 32 * c));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(pairs, scale_pair16(scales8, c)));
      }
    }
    sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(offset, 2));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(wb[i].d) * xb[i].d),
                          _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum_ps(acc);
}

// The integer part shared by Q4_K and Q5_K (`qh` nullptr for Q4_K): per lane, the sums of
// quant * q8 * sub-block scale over the block's 256 elements. The scales (bytes of `scales`)
// are spread once into int16 lanes; each step picks its pair with one byte shuffle.
__m256i q45_k_scaled_sums(const uint8_t* qs, const uint8_t* qh, uint64_t scales,
                          const BlockQ8_K& xb) {
  const __m256i scales16 =
      _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(int64_t(scales))));
  const auto scale_of = [&](int sub_block) {  // scale `sub_block` in every int16 lane
    return _mm256_shuffle_epi8(scales16, _mm256_set1_epi16(int16_t(0x0100 + 0x0202 * sub_block)));
  };
  const __m256i high_bits = qh != nullptr ? loadu256(qh) : _mm256_setzero_si256();
  __m256i sumi = _mm256_setzero_si256();
  for (int j = 0; j < 4; ++j) {  // 64 elements: low nibbles then high nibbles
    const __m256i q4 = loadu256(qs + 32 * j);
    __m256i lo = _mm256_and_si256(q4, low_nibble_mask());
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), low_nibble_mask());
    if (qh != nullptr) {
      lo = _mm256_or_si256(lo, _mm256_slli_epi16(byte_bit(high_bits, 2 * j), 4));
      hi = _mm256_or_si256(hi, _mm256_slli_epi16(byte_bit(high_bits, 2 * j + 1), 4));
    }
    const __m256i p_lo =
        _mm256_madd_epi16(_mm256_maddubs_epi16(lo, loadu256(xb.qs + 64 * j)), scale_of(2 * j));
    const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, loadu256(xb.qs + 64 * j + 32)),
                                           scale_of(2 * j + 1));
    sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p_lo, p_hi));
  }
  return sumi;
}

// Q4_K in ggml's x86 order: the scaled integer sums in eight lanes, and the minimum terms in
// four lanes (sub-block pairs), scaled by -dmin, added at the very end.
float dot_q4_k(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ4_K*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);  // [n / 256]
  __m256 acc = _mm256_setzero_ps();
  __m128 acc_min = _mm_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const K4Scales unpacked = unpack_k4_scales(wb[i].scales);
    // Lane k: mins[2k] * (bsums 4k, 4k+1) + mins[2k+1] * (bsums 4k+2, 4k+3), from the 8 lanes
    // of minimum * its two bsums added in neighbouring pairs.
    const __m256i per_min = bsums_dot(xb[i], mins_per_bsum(unpacked.mins));
    const __m128i min_terms =
        _mm_hadd_epi32(_mm256_castsi256_si128(per_min), _mm256_extracti128_si256(per_min, 1));
    const float dmin = -xb[i].d * half_to_float(wb[i].dmin);
    acc_min = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(min_terms), acc_min);
    const __m256i sumi = q45_k_scaled_sums(wb[i].qs, nullptr, unpacked.scales, xb[i]);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(xb[i].d * half_to_float(wb[i].d)),
                          _mm256_cvtepi32_ps(sumi), acc);
  }
  acc_min = _mm_add_ps(acc_min, _mm_movehl_ps(acc_min, acc_min));
  acc_min = _mm_add_ss(acc_min, _mm_movehdup_ps(acc_min));
  return hsum_ps(acc) + _mm_cvtss_f32(acc_min);
}

float dot_q5_k(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ5_K*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);  // [n / 256]
  __m256 acc = _mm256_setzero_ps();
  __m256 acc_min = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const K4Scales unpacked = unpack_k4_scales(wb[i].scales);
    const __m256i mins_dot = bsums_dot(xb[i], mins_per_bsum(unpacked.mins));
    const __m256i sumi = q45_k_scaled_sums(wb[i].qs, wb[i].qh, unpacked.scales, xb[i]);
    const float d = half_to_float(wb[i].d) * xb[i].d;
    const float dmin = half_to_float(wb[i].dmin) * xb[i].d;
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    acc_min = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(mins_dot), acc_min);
  }
  return hsum_ps(acc) - hsum_ps(acc_min);
}

// Q6_K values are u - 32 with u in 0..63: u*q8 by maddubs per sub-block, and the -32 folded in
// per lane pair of sub-blocks through Q8_K's bsums (32 * (bsum[2k] sc[2k] + bsum[2k+1] sc[2k+1])
// off lane k), as the x86 kernel of llama.cpp b11549 does: the lanes' integers — and so their
// rounding to float — are llama.cpp's.
float dot_q6_k(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ6_K*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);  // [n / 256]
  const __m256i two_bits = _mm256_set1_epi8(3);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const __m128i scales8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[i].scales));
    const __m256i offset = _mm256_slli_epi32(bsums_dot(xb[i], _mm256_cvtepi8_epi16(scales8)), 5);
    __m256i sumi = _mm256_setzero_si256();
    for (int half = 0; half < 2; ++half) {
      const __m256i ql0 = loadu256(wb[i].ql + 64 * half);
      const __m256i ql1 = loadu256(wb[i].ql + 64 * half + 32);
      const __m256i qh = loadu256(wb[i].qh + 32 * half);
      const __m256i tops[4] = {_mm256_and_si256(qh, two_bits),
                               _mm256_and_si256(_mm256_srli_epi16(qh, 2), two_bits),
                               _mm256_and_si256(_mm256_srli_epi16(qh, 4), two_bits),
                               _mm256_and_si256(_mm256_srli_epi16(qh, 6), two_bits)};
      const __m256i lows[4] = {_mm256_and_si256(ql0, low_nibble_mask()),
                               _mm256_and_si256(ql1, low_nibble_mask()),
                               _mm256_and_si256(_mm256_srli_epi16(ql0, 4), low_nibble_mask()),
                               _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low_nibble_mask())};
      for (int k = 0; k < 4; ++k) {
        const int c = 4 * half + k;
        const __m256i q = _mm256_or_si256(lows[k], _mm256_slli_epi16(tops[k], 4));
        const __m256i pairs = _mm256_maddubs_epi16(q, loadu256(xb[i].qs + 32 * c));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(pairs, scale_pair16(scales8, c)));
      }
    }
    sumi = _mm256_sub_epi32(sumi, offset);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(wb[i].d) * xb[i].d),
                          _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum_ps(acc);
}

float dot_iq4_xs(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockIQ4_XS*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);    // [n / 256]
  const __m256i table =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kValuesIq4nl)));
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i sumi = _mm256_setzero_si256();
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      const int low = (wb[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf;
      const int high = (wb[i].scales_h >> (2 * ib)) & 3;
      const __m256i q = _mm256_shuffle_epi8(table, unpack_nibbles(wb[i].qs + 16 * ib));
      const __m256i pairs = maddubs_s8_s8(q, loadu256(xb[i].qs + 32 * ib));
      sumi = _mm256_add_epi32(
          sumi, _mm256_madd_epi16(pairs, _mm256_set1_epi16(int16_t((low | (high << 4)) - 32))));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(wb[i].d) * xb[i].d),
                          _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum_ps(acc);
}

}  // namespace

void add_avx2_kquant_kernels(VecDotTable& table) {
  table.kernels[int(QType::Q2_K)] = {dot_q2_k, CpuIsa::kAvx2};
  table.kernels[int(QType::Q3_K)] = {dot_q3_k, CpuIsa::kAvx2};
  table.kernels[int(QType::Q4_K)] = {dot_q4_k, CpuIsa::kAvx2};
  table.kernels[int(QType::Q5_K)] = {dot_q5_k, CpuIsa::kAvx2};
  table.kernels[int(QType::Q6_K)] = {dot_q6_k, CpuIsa::kAvx2};
  table.kernels[int(QType::IQ4_XS)] = {dot_iq4_xs, CpuIsa::kAvx2};
}

}  // namespace sluice::cpu
