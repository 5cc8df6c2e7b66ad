// Row kernels of the IQ types. Each group of 8 (or 4) weights is a row of a lookup grid
// (iq_tables.h) times a sub-block scale, with signs stored apart; IQ4_XS uses the IQ4_NL value
// table. The float grouping ((d * scale) * grid) * sign matches gguf-py exactly.
#include <cstring>

#include "core/half.h"
#include "quant/blocks.h"
#include "quant/dequantize_kernels.h"
#include "quant/iq_tables.h"

namespace sluice::dequant {
namespace {

uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

uint16_t load_u16(const void* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Byte j of a packed grid row (element j of the group), as int8 for IQ1 and uint8 otherwise.
inline int grid_u8(uint64_t row, int j) {
  return int((row >> (8 * j)) & 0xff);
}
inline int grid_i8(uint64_t row, int j) {
  return int(int8_t(uint8_t((row >> (8 * j)) & 0xff)));
}

inline float sign_of(uint8_t signs, int j) {
  return (signs & kKmaskIq2xs[j]) ? -1.0f : 1.0f;
}

// Eight weights from a 2-bit grid row; `signs` holds one sign bit per weight.
void put_group8(float* y, float db, uint64_t row, uint8_t signs) {
  for (int j = 0; j < 8; ++j) y[j] = db * float(grid_u8(row, j)) * sign_of(signs, j);
}

}  // namespace

void row_iq2_xxs(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIQ2_XXS*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_fp32(blocks[i].d);
    for (int ib = 0; ib < kQK_K / 32; ++ib, dst += 32) {
      // Per 32 weights: four grid indices (bytes), then 4 x 7-bit sign indices + a 4-bit scale.
      const uint32_t indices = load_u32(&blocks[i].qs[4 * ib]);
      const uint32_t signs_scale = load_u32(&blocks[i].qs[4 * ib + 2]);
      const float db = d * (0.5f + float(signs_scale >> 28)) * 0.25f;
      for (int l = 0; l < 4; ++l) {
        const uint8_t signs = kKsignsIq2xs[(signs_scale >> (7 * l)) & 127];
        put_group8(dst + 8 * l, db, kIq2xxsGrid[(indices >> (8 * l)) & 0xff], signs);
      }
    }
  }
}

void row_iq2_xs(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIQ2_XS*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_fp32(blocks[i].d);
    for (int ib = 0; ib < kQK_K / 32; ++ib, dst += 32) {
      const uint8_t sc = blocks[i].scales[ib];
      const float db[2] = {d * (0.5f + float(sc & 0x0f)) * 0.25f,
                           d * (0.5f + float(sc >> 4)) * 0.25f};
      for (int l = 0; l < 4; ++l) {
        const uint16_t q = blocks[i].qs[4 * ib + l];  // 9-bit grid index, 7-bit sign index
        put_group8(dst + 8 * l, db[l / 2], kIq2xsGrid[q & 511], kKsignsIq2xs[q >> 9]);
      }
    }
  }
}

void row_iq2_s(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIQ2_S*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const BlockIQ2_S& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    const uint8_t* signs = b.qs + kQK_K / 8;  // the second half of qs holds explicit sign bytes
    for (int ib = 0; ib < kQK_K / 32; ++ib, dst += 32) {
      const float db[2] = {d * (0.5f + float(b.scales[ib] & 0x0f)) * 0.25f,
                           d * (0.5f + float(b.scales[ib] >> 4)) * 0.25f};
      for (int l = 0; l < 4; ++l) {
        const int index = b.qs[4 * ib + l] | (((b.qh[ib] >> (2 * l)) & 3) << 8);
        put_group8(dst + 8 * l, db[l / 2], kIq2sGrid[index], signs[4 * ib + l]);
      }
    }
  }
}

void row_iq3_xxs(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIQ3_XXS*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const BlockIQ3_XXS& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    const uint8_t* signs_scales = b.qs + kQK_K / 4;  // after the 64 grid-index bytes
    for (int ib = 0; ib < kQK_K / 32; ++ib, dst += 32) {
      const uint32_t aux = load_u32(signs_scales + 4 * ib);
      const float db = d * (0.5f + float(aux >> 28)) * 0.5f;
      for (int l = 0; l < 4; ++l) {
        const uint8_t signs = kKsignsIq2xs[(aux >> (7 * l)) & 127];
        for (int half = 0; half < 2; ++half) {
          const uint32_t row = kIq3xxsGrid[b.qs[8 * ib + 2 * l + half]];
          for (int j = 0; j < 4; ++j) {
            const float g = float((row >> (8 * j)) & 0xff);
            dst[8 * l + 4 * half + j] = db * g * sign_of(signs, 4 * half + j);
          }
        }
      }
    }
  }
}

void row_iq3_s(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIQ3_S*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i, dst += kQK_K) {
    const BlockIQ3_S& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    for (int e = 0; e < kQK_K; ++e) {
      const int sub = e / 32;  // one 4-bit scale per 32 weights
      const float db = d * float(1 + 2 * ((b.scales[sub / 2] >> (4 * (sub % 2))) & 0x0f));
      const int r = e / 4;  // grid row: 8 low bits in qs, the 9th in qh
      const int index = b.qs[r] | (((b.qh[r / 8] >> (r % 8)) & 1) << 8);
      const float g = float((kIq3sGrid[index] >> (8 * (e % 4))) & 0xff);
      dst[e] = db * g * sign_of(b.signs[e / 8], e % 8);
    }
  }
}

void row_iq1_s(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIQ1_S*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const BlockIQ1_S& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    for (int ib = 0; ib < kQK_K / 32; ++ib, dst += 32) {
      // qh: 4 x 3 high index bits, a 3-bit scale, and the sign of delta in the top bit.
      const uint16_t qh = b.qh[ib];
      const float dl = d * float(2 * ((qh >> 12) & 7) + 1);
      const float delta = (qh & 0x8000) ? -kIq1sDelta : kIq1sDelta;
      for (int l = 0; l < 4; ++l) {
        const uint64_t row = kIq1sGrid[b.qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)];
        for (int j = 0; j < 8; ++j) dst[8 * l + j] = dl * (float(grid_i8(row, j)) + delta);
      }
    }
  }
}

void row_iq1_m(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIQ1_M*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const BlockIQ1_M& b = blocks[i];
    uint16_t sc[4];
    for (int k = 0; k < 4; ++k) sc[k] = load_u16(b.scales + 2 * k);
    // The block scale is a half whose four nibbles are the top nibbles of sc[0..3].
    const uint16_t d_bits = uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                     ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
    const float d = fp16_to_fp32(d_bits);
    for (int ib = 0; ib < kQK_K / 32; ++ib, dst += 32) {
      const int shift = 6 * (ib % 2);
      const float dl[2] = {d * float(2 * ((sc[ib / 2] >> shift) & 7) + 1),
                           d * float(2 * ((sc[ib / 2] >> (shift + 3)) & 7) + 1)};
      for (int l = 0; l < 4; ++l) {
        const int nibble = (b.qh[2 * ib + l / 2] >> (4 * (l % 2))) & 0x0f;
        const uint64_t row = kIq1sGrid[b.qs[4 * ib + l] | ((nibble & 7) << 8)];
        const float delta = (nibble & 8) ? -kIq1mDelta : kIq1mDelta;
        for (int j = 0; j < 8; ++j) {
          dst[8 * l + j] = dl[l / 2] * (float(grid_i8(row, j)) + delta);
        }
      }
    }
  }
}

void row_iq4_xs(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIQ4_XS*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const BlockIQ4_XS& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    for (int ib = 0; ib < kQK_K / 32; ++ib, dst += 32) {
      // 6-bit scale: low nibble from scales_l, top 2 bits from scales_h; offset by 32.
      const int ls =
          ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0f) | (((b.scales_h >> (2 * ib)) & 3) << 4);
      const float dl = d * float(ls - 32);
      const uint8_t* qs = b.qs + 16 * ib;
      for (int j = 0; j < 16; ++j) {
        dst[j] = dl * float(kValuesIq4nl[qs[j] & 0x0f]);
        dst[j + 16] = dl * float(kValuesIq4nl[qs[j] >> 4]);
      }
    }
  }
}

}  // namespace sluice::dequant
