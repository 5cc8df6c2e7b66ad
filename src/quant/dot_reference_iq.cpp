// Reference dot products of the IQ types against Q8_K activations. Weights are grid rows
// (8 or 4 magnitudes per index, iq_tables.h) with sign masks, scaled per 32 or 16 elements by
// small odd integers; the sub-block scales multiply integer sums and one float scale per
// super-block multiplies the total. The constant factors (1/8, 1/4) are ggml's.
#include <cstring>

#include "core/half.h"
#include "quant/blocks.h"
#include "quant/dot_reference_kernels.h"
#include "quant/iq_tables.h"

namespace sluice::dot {
namespace {

inline int grid8(uint64_t row, int j) {
  return int((row >> (8 * j)) & 0xff);
}
inline int grid8_signed(uint64_t row, int j) {
  return int(int8_t((row >> (8 * j)) & 0xff));
}
inline int grid4(uint32_t row, int j) {
  return int((row >> (8 * j)) & 0xff);
}
inline int sign_of(uint8_t signs, int j) {
  return (signs & kKmaskIq2xs[j]) ? -1 : 1;
}

// Eight grid magnitudes with their signs against eight activations.
inline int signed_grid8_dot(uint64_t row, uint8_t signs, const int8_t* q8) {
  int sum = 0;
  for (int j = 0; j < 8; ++j) sum += grid8(row, j) * q8[j] * sign_of(signs, j);
  return sum;
}

// Two 4-wide grid rows (IQ3 types) with one sign byte against eight activations.
inline int signed_grid4x2_dot(uint32_t row1, uint32_t row2, uint8_t signs, const int8_t* q8) {
  int sum = 0;
  for (int j = 0; j < 4; ++j) {
    sum += grid4(row1, j) * q8[j] * sign_of(signs, j);
    sum += grid4(row2, j) * q8[j + 4] * sign_of(signs, j + 4);
  }
  return sum;
}

}  // namespace

// IQ2_XXS: per 32 elements two uint32: four 8-bit grid indices; then four 7-bit sign indices
// and a 4-bit scale in the top bits.
float iq2_xxs_q8_k(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockIQ2_XXS*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);     // [n / 256]
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const int8_t* q8 = xb[i].qs;
    int sumi = 0;
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      uint32_t aux[2];
      std::memcpy(aux, wb[i].qs + 4 * ib, sizeof(aux));
      const int scale = 2 * int(aux[1] >> 28) + 1;
      int sub_sum = 0;
      for (int l = 0; l < 4; ++l, q8 += 8) {
        const uint64_t row = kIq2xxsGrid[(aux[0] >> (8 * l)) & 0xff];
        sub_sum += signed_grid8_dot(row, kKsignsIq2xs[(aux[1] >> (7 * l)) & 127], q8);
      }
      sumi += scale * sub_sum;
    }
    sum += fp16_to_fp32(wb[i].d) * xb[i].d * float(sumi);
  }
  return 0.125f * sum;
}

// IQ2_XS: each uint16 is a 9-bit grid index and a 7-bit sign index; a nibble scale per 16.
float iq2_xs_q8_k(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockIQ2_XS*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);    // [n / 256]
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const int8_t* q8 = xb[i].qs;
    int sumi = 0;
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      for (int part = 0; part < 2; ++part) {
        const int scale = 2 * ((wb[i].scales[ib] >> (4 * part)) & 0xf) + 1;
        int sub_sum = 0;
        for (int l = 2 * part; l < 2 * part + 2; ++l, q8 += 8) {
          const uint16_t q = wb[i].qs[4 * ib + l];
          sub_sum += signed_grid8_dot(kIq2xsGrid[q & 511], kKsignsIq2xs[q >> 9], q8);
        }
        sumi += scale * sub_sum;
      }
    }
    sum += fp16_to_fp32(wb[i].d) * xb[i].d * float(sumi);
  }
  return 0.125f * sum;
}

// IQ2_S: 10-bit grid indices (8 bits in qs, 2 in qh), explicit sign bytes after the indices.
float iq2_s_q8_k(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockIQ2_S*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);   // [n / 256]
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* qs = wb[i].qs;
    const uint8_t* signs = wb[i].qs + kQK_K / 8;
    const int8_t* q8 = xb[i].qs;
    int sumi = 0;
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      for (int part = 0; part < 2; ++part) {
        const int scale = 2 * ((wb[i].scales[ib] >> (4 * part)) & 0xf) + 1;
        int sub_sum = 0;
        for (int l = 2 * part; l < 2 * part + 2; ++l, q8 += 8) {
          const int index = qs[4 * ib + l] | ((wb[i].qh[ib] << (8 - 2 * l)) & 0x300);
          sub_sum += signed_grid8_dot(kIq2sGrid[index], signs[4 * ib + l], q8);
        }
        sumi += scale * sub_sum;
      }
    }
    sum += fp16_to_fp32(wb[i].d) * xb[i].d * float(sumi);
  }
  return 0.125f * sum;
}

// IQ3_XXS: 64 grid bytes (4-wide rows), then per 32 elements a uint32 of four 7-bit sign
// indices and a 4-bit scale.
float iq3_xxs_q8_k(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockIQ3_XXS*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);     // [n / 256]
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* q3 = wb[i].qs;
    const uint8_t* scales_and_signs = wb[i].qs + kQK_K / 4;
    const int8_t* q8 = xb[i].qs;
    int sumi = 0;
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      uint32_t aux;
      std::memcpy(&aux, scales_and_signs + 4 * ib, sizeof(aux));
      const int scale = 2 * int(aux >> 28) + 1;
      int sub_sum = 0;
      for (int l = 0; l < 4; ++l, q8 += 8) {
        sub_sum +=
            signed_grid4x2_dot(kIq3xxsGrid[q3[8 * ib + 2 * l]], kIq3xxsGrid[q3[8 * ib + 2 * l + 1]],
                               kKsignsIq2xs[(aux >> (7 * l)) & 127], q8);
      }
      sumi += scale * sub_sum;
    }
    sum += fp16_to_fp32(wb[i].d) * xb[i].d * float(sumi);
  }
  return 0.25f * sum;
}

// IQ3_S: 9-bit grid indices (8 in qs, 1 in qh), explicit sign bytes, a nibble scale per 32.
float iq3_s_q8_k(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockIQ3_S*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);   // [n / 256]
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const int8_t* q8 = xb[i].qs;
    int sumi = 0;
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      const int scale = 2 * ((wb[i].scales[ib / 2] >> (4 * (ib % 2))) & 0xf) + 1;
      const uint8_t* qs = wb[i].qs + 8 * ib;
      const int qh = wb[i].qh[ib];
      int sub_sum = 0;
      for (int l = 0; l < 4; ++l, q8 += 8) {
        const uint32_t row1 = kIq3sGrid[qs[2 * l] | ((qh << (8 - 2 * l)) & 256)];
        const uint32_t row2 = kIq3sGrid[qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256)];
        sub_sum += signed_grid4x2_dot(row1, row2, wb[i].signs[4 * ib + l], q8);
      }
      sumi += scale * sub_sum;
    }
    sum += fp16_to_fp32(wb[i].d) * xb[i].d * float(sumi);
  }
  return sum;
}

// IQ1_S: 11-bit indices into a grid of -1/0/1 (8 bits in qs, 3 in qh), a 3-bit scale and a
// delta sign per 32; the delta term uses the activation block sums.
float iq1_s_q8_k(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockIQ1_S*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);   // [n / 256]
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const int8_t* q8 = xb[i].qs;
    int sumi = 0;
    int sumi_delta = 0;
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      const int qh = wb[i].qh[ib];
      const int scale = 2 * ((qh >> 12) & 7) + 1;
      const int delta = (qh & 0x8000) ? -1 : 1;
      int sub_sum = 0;
      for (int l = 0; l < 4; ++l, q8 += 8) {
        const uint64_t row = kIq1sGrid[wb[i].qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)];
        for (int j = 0; j < 8; ++j) sub_sum += grid8_signed(row, j) * q8[j];
      }
      sumi += scale * sub_sum;
      sumi_delta += scale * delta * (xb[i].bsums[2 * ib] + xb[i].bsums[2 * ib + 1]);
    }
    sum += fp16_to_fp32(wb[i].d) * xb[i].d * (float(sumi) + kIq1sDelta * float(sumi_delta));
  }
  return sum;
}

// IQ1_M: as IQ1_S with a delta sign per 8 and a 3-bit scale per 16; the half scale is spread
// over the top nibbles of the four uint16 scale words.
float iq1_m_q8_k(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockIQ1_M*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);   // [n / 256]
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    uint16_t sc[4];
    std::memcpy(sc, wb[i].scales, sizeof(sc));
    const uint16_t d_bits = uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                     ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
    const int8_t* q8 = xb[i].qs;
    int sumi = 0;
    int sumi_delta = 0;
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      const uint8_t* qh = wb[i].qh + 2 * ib;
      const int scale1 = 2 * ((sc[ib / 2] >> (6 * (ib % 2))) & 7) + 1;
      const int scale2 = 2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 7) + 1;
      for (int l = 0; l < 4; ++l, q8 += 8) {
        const int high = (l % 2 == 0) ? (qh[l / 2] & 0x7) : ((qh[l / 2] >> 4) & 0x7);
        const uint64_t row = kIq1sGrid[wb[i].qs[4 * ib + l] | (high << 8)];
        const int delta = (qh[l / 2] & (l % 2 == 0 ? 0x08 : 0x80)) ? -1 : 1;
        int grid_sum = 0;
        int q8_sum = 0;
        for (int j = 0; j < 8; ++j) {
          grid_sum += grid8_signed(row, j) * q8[j];
          q8_sum += q8[j];
        }
        const int scale = l < 2 ? scale1 : scale2;
        sumi += scale * grid_sum;
        sumi_delta += scale * delta * q8_sum;
      }
    }
    sum += fp16_to_fp32(d_bits) * xb[i].d * (float(sumi) + kIq1mDelta * float(sumi_delta));
  }
  return sum;
}

// IQ4_XS: IQ4_NL's table with a 6-bit scale (stored biased by 32) per 32 elements: low 4 bits
// in scales_l, high 2 in scales_h.
float iq4_xs_q8_k(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockIQ4_XS*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);    // [n / 256]
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int sumi = 0;
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      const int low = (wb[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf;
      const int high = (wb[i].scales_h >> (2 * ib)) & 3;
      const int scale = (low | (high << 4)) - 32;
      const uint8_t* qs = wb[i].qs + 16 * ib;
      const int8_t* q8 = xb[i].qs + 32 * ib;
      int sub_sum = 0;
      for (int j = 0; j < 16; ++j) {
        sub_sum += q8[j] * kValuesIq4nl[qs[j] & 0xf] + q8[j + 16] * kValuesIq4nl[qs[j] >> 4];
      }
      sumi += scale * sub_sum;
    }
    sum += fp16_to_fp32(wb[i].d) * xb[i].d * float(sumi);
  }
  return sum;
}

}  // namespace sluice::dot
