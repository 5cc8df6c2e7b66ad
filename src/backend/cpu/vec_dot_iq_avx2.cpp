// AVX2 dot products of the grid-based IQ types against Q8_K: IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S, IQ1_S and IQ1_M. Per 32 elements the grid rows are gathered by scalar
// index into one register (4 rows of 8 or 8 rows of 4 magnitudes), the signs become a +-1
// byte vector that flips the activations, and maddubs + madd apply the sub-block scales.
// IQ1 types fold their delta into the weights: 8 * grid + delta is exact in int8.
#include "backend/cpu/avx2_util.h"
#include "backend/cpu/vec_dot_table.h"
#include "quant/blocks.h"
#include "quant/iq_tables.h"

namespace sluice::cpu {
namespace {

// Four 8-byte grid rows, element order as in memory.
__m256i rows8(uint64_t r0, uint64_t r1, uint64_t r2, uint64_t r3) {
  return _mm256_set_epi64x(int64_t(r3), int64_t(r2), int64_t(r1), int64_t(r0));
}

// Activations with the sign of 32 weights: bit j of `signs` set means element j is negative.
__m256i apply_signs(const uint8_t* signs /*[4]*/, const int8_t* q8 /*[32]*/) {
  const __m256i plus_minus = _mm256_or_si256(expand_bits(signs), _mm256_set1_epi8(1));
  return _mm256_sign_epi8(loadu256(q8), plus_minus);
}

// The 4 sign bytes of a sub-block whose signs are 7-bit indices into kKsignsIq2xs.
void signs_from_indices(uint32_t packed, uint8_t* signs /*[4]*/) {
  for (int l = 0; l < 4; ++l) signs[l] = kKsignsIq2xs[(packed >> (7 * l)) & 127];
}

// int16 scales for maddubs' 16 pair sums: the first 8 pairs get `low`, the last 8 `high`.
__m256i scales16(int low, int high) {
  return _mm256_set_m128i(_mm_set1_epi16(int16_t(high)), _mm_set1_epi16(int16_t(low)));
}

// Unsigned grid magnitudes x signed activations, scaled per 16 elements.
__m256i scaled_sum(__m256i grid, __m256i signed_q8, __m256i scale16) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(grid, signed_q8), scale16);
}

float dot_iq2_xxs(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockIQ2_XXS*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);     // [n / 256]
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i sumi = _mm256_setzero_si256();
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      uint32_t aux[2];
      std::memcpy(aux, wb[i].qs + 4 * ib, sizeof(aux));
      const __m256i grid = rows8(kIq2xxsGrid[aux[0] & 0xff], kIq2xxsGrid[(aux[0] >> 8) & 0xff],
                                 kIq2xxsGrid[(aux[0] >> 16) & 0xff], kIq2xxsGrid[aux[0] >> 24]);
      uint8_t signs[4];
      signs_from_indices(aux[1], signs);
      const int scale = 2 * int(aux[1] >> 28) + 1;
      sumi = _mm256_add_epi32(sumi, scaled_sum(grid, apply_signs(signs, xb[i].qs + 32 * ib),
                                               _mm256_set1_epi16(int16_t(scale))));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(wb[i].d) * xb[i].d),
                          _mm256_cvtepi32_ps(sumi), acc);
  }
  return 0.125f * hsum_ps(acc);
}

float dot_iq2_xs(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockIQ2_XS*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);    // [n / 256]
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i sumi = _mm256_setzero_si256();
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      const uint16_t* q = wb[i].qs + 4 * ib;
      const __m256i grid = rows8(kIq2xsGrid[q[0] & 511], kIq2xsGrid[q[1] & 511],
                                 kIq2xsGrid[q[2] & 511], kIq2xsGrid[q[3] & 511]);
      const uint8_t signs[4] = {kKsignsIq2xs[q[0] >> 9], kKsignsIq2xs[q[1] >> 9],
                                kKsignsIq2xs[q[2] >> 9], kKsignsIq2xs[q[3] >> 9]};
      const int packed = wb[i].scales[ib];
      sumi = _mm256_add_epi32(sumi,
                              scaled_sum(grid, apply_signs(signs, xb[i].qs + 32 * ib),
                                         scales16(2 * (packed & 0xf) + 1, 2 * (packed >> 4) + 1)));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(wb[i].d) * xb[i].d),
                          _mm256_cvtepi32_ps(sumi), acc);
  }
  return 0.125f * hsum_ps(acc);
}

float dot_iq2_s(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockIQ2_S*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);   // [n / 256]
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* signs = wb[i].qs + kQK_K / 8;
    __m256i sumi = _mm256_setzero_si256();
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      const uint8_t* qs = wb[i].qs + 4 * ib;
      const int qh = wb[i].qh[ib];
      const __m256i grid =
          rows8(kIq2sGrid[qs[0] | ((qh << 8) & 0x300)], kIq2sGrid[qs[1] | ((qh << 6) & 0x300)],
                kIq2sGrid[qs[2] | ((qh << 4) & 0x300)], kIq2sGrid[qs[3] | ((qh << 2) & 0x300)]);
      const int packed = wb[i].scales[ib];
      sumi = _mm256_add_epi32(sumi,
                              scaled_sum(grid, apply_signs(signs + 4 * ib, xb[i].qs + 32 * ib),
                                         scales16(2 * (packed & 0xf) + 1, 2 * (packed >> 4) + 1)));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(wb[i].d) * xb[i].d),
                          _mm256_cvtepi32_ps(sumi), acc);
  }
  return 0.125f * hsum_ps(acc);
}

float dot_iq3_xxs(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockIQ3_XXS*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);     // [n / 256]
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* scales_and_signs = wb[i].qs + kQK_K / 4;
    __m256i sumi = _mm256_setzero_si256();
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      const uint8_t* q3 = wb[i].qs + 8 * ib;
      const __m256i grid = _mm256_setr_epi32(int(kIq3xxsGrid[q3[0]]), int(kIq3xxsGrid[q3[1]]),
                                             int(kIq3xxsGrid[q3[2]]), int(kIq3xxsGrid[q3[3]]),
                                             int(kIq3xxsGrid[q3[4]]), int(kIq3xxsGrid[q3[5]]),
                                             int(kIq3xxsGrid[q3[6]]), int(kIq3xxsGrid[q3[7]]));
      uint32_t aux;
      std::memcpy(&aux, scales_and_signs + 4 * ib, sizeof(aux));
      uint8_t signs[4];
      signs_from_indices(aux, signs);
      sumi = _mm256_add_epi32(sumi, scaled_sum(grid, apply_signs(signs, xb[i].qs + 32 * ib),
                                               _mm256_set1_epi16(int16_t(2 * (aux >> 28) + 1))));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(wb[i].d) * xb[i].d),
                          _mm256_cvtepi32_ps(sumi), acc);
  }
  return 0.25f * hsum_ps(acc);
}

float dot_iq3_s(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockIQ3_S*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);   // [n / 256]
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i sumi = _mm256_setzero_si256();
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      const uint8_t* qs = wb[i].qs + 8 * ib;
      const int qh = wb[i].qh[ib];
      int rows[8];
      for (int k = 0; k < 8; ++k) rows[k] = int(kIq3sGrid[qs[k] | ((qh << (8 - k)) & 256)]);
      const __m256i grid = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows));
      const int scale = 2 * ((wb[i].scales[ib / 2] >> (4 * (ib % 2))) & 0xf) + 1;
      sumi = _mm256_add_epi32(
          sumi, scaled_sum(grid, apply_signs(wb[i].signs + 4 * ib, xb[i].qs + 32 * ib),
                           _mm256_set1_epi16(int16_t(scale))));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(wb[i].d) * xb[i].d),
                          _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum_ps(acc);
}

// 8 * (grid value) + delta per group of 8, for the IQ1 types: values in -9..9.
__m256i iq1_weights(__m256i grid, __m256i delta) {
  const __m256i g2 = _mm256_add_epi8(grid, grid);
  const __m256i g4 = _mm256_add_epi8(g2, g2);
  return _mm256_add_epi8(_mm256_add_epi8(g4, g4), delta);
}

constexpr int64_t kPlusOnes = 0x0101010101010101LL;
constexpr int64_t kMinusOnes = -1;

float dot_iq1_s(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockIQ1_S*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);   // [n / 256]
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i sumi = _mm256_setzero_si256();
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      const uint8_t* qs = wb[i].qs + 4 * ib;
      const int qh = wb[i].qh[ib];
      const __m256i grid =
          rows8(kIq1sGrid[qs[0] | ((qh << 8) & 0x700)], kIq1sGrid[qs[1] | ((qh << 5) & 0x700)],
                kIq1sGrid[qs[2] | ((qh << 2) & 0x700)], kIq1sGrid[qs[3] | ((qh >> 1) & 0x700)]);
      const __m256i delta = _mm256_set1_epi64x((qh & 0x8000) ? kMinusOnes : kPlusOnes);
      const __m256i pairs = maddubs_s8_s8(iq1_weights(grid, delta), loadu256(xb[i].qs + 32 * ib));
      const int scale = 2 * ((qh >> 12) & 7) + 1;
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(pairs, _mm256_set1_epi16(int16_t(scale))));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(wb[i].d) * xb[i].d),
                          _mm256_cvtepi32_ps(sumi), acc);
  }
  return 0.125f * hsum_ps(acc);
}

float dot_iq1_m(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockIQ1_M*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);   // [n / 256]
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    uint16_t sc[4];
    std::memcpy(sc, wb[i].scales, sizeof(sc));
    const uint16_t d_bits = uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                     ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
    __m256i sumi = _mm256_setzero_si256();
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      const uint8_t* qs = wb[i].qs + 4 * ib;
      const uint8_t* qh = wb[i].qh + 2 * ib;
      const __m256i grid = rows8(
          kIq1sGrid[qs[0] | ((qh[0] << 8) & 0x700)], kIq1sGrid[qs[1] | ((qh[0] << 4) & 0x700)],
          kIq1sGrid[qs[2] | ((qh[1] << 8) & 0x700)], kIq1sGrid[qs[3] | ((qh[1] << 4) & 0x700)]);
      const __m256i delta = _mm256_set_epi64x(
          (qh[1] & 0x80) ? kMinusOnes : kPlusOnes, (qh[1] & 0x08) ? kMinusOnes : kPlusOnes,
          (qh[0] & 0x80) ? kMinusOnes : kPlusOnes, (qh[0] & 0x08) ? kMinusOnes : kPlusOnes);
      const __m256i pairs = maddubs_s8_s8(iq1_weights(grid, delta), loadu256(xb[i].qs + 32 * ib));
      const int shift = 6 * (ib % 2);
      const __m256i scale =
          scales16(2 * ((sc[ib / 2] >> shift) & 7) + 1, 2 * ((sc[ib / 2] >> (shift + 3)) & 7) + 1);
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(pairs, scale));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float(d_bits) * xb[i].d), _mm256_cvtepi32_ps(sumi),
                          acc);
  }
  return 0.125f * hsum_ps(acc);
}

}  // namespace

void add_avx2_iq_kernels(VecDotTable& table) {
  table.kernels[int(QType::IQ2_XXS)] = {dot_iq2_xxs, CpuIsa::kAvx2};
  table.kernels[int(QType::IQ2_XS)] = {dot_iq2_xs, CpuIsa::kAvx2};
  table.kernels[int(QType::IQ2_S)] = {dot_iq2_s, CpuIsa::kAvx2};
  table.kernels[int(QType::IQ3_XXS)] = {dot_iq3_xxs, CpuIsa::kAvx2};
  table.kernels[int(QType::IQ3_S)] = {dot_iq3_s, CpuIsa::kAvx2};
  table.kernels[int(QType::IQ1_S)] = {dot_iq1_s, CpuIsa::kAvx2};
  table.kernels[int(QType::IQ1_M)] = {dot_iq1_m, CpuIsa::kAvx2};
}

}  // namespace sluice::cpu
