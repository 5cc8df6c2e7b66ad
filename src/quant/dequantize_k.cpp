// Row kernels of the K-quants (Q2_K … Q6_K) and the ternary TQ1_0 / TQ2_0 super-blocks.
// Element order and the grouping of every float product follow gguf-py (which matches ggml's
// to_float): the sub-block scale is formed first (d * scale), then applied to the quant.
#include <cstdint>

#include "core/half.h"
#include "quant/blocks.h"
#include "quant/dequantize_kernels.h"

namespace sluice::dequant {
namespace {

// Q4_K / Q5_K pack 8 six-bit scales and 8 six-bit mins into 12 bytes: bytes 0-3 hold scales
// 0-3 (low 6 bits) and the top bits of scales 4-7, bytes 4-7 the same for the mins, bytes 8-11
// the low nibbles of scales 4-7 (low half) and mins 4-7 (high half).
void unpack_scale_min(const uint8_t* packed, int sub, uint8_t& scale, uint8_t& min) {
  if (sub < 4) {
    scale = packed[sub] & 0x3f;
    min = packed[sub + 4] & 0x3f;
  } else {
    scale = uint8_t((packed[sub + 4] & 0x0f) | ((packed[sub - 4] >> 2) & 0x30));
    min = uint8_t((packed[sub + 4] >> 4) | ((packed[sub] >> 2) & 0x30));
  }
}

}  // namespace

void row_q2_k(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ2_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i, dst += kQK_K) {
    const BlockQ2_K& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    const float dmin = fp16_to_fp32(b.dmin);
    for (int e = 0; e < kQK_K; ++e) {
      // 128-element halves; in each, four 2-bit planes of the same 32 bytes.
      const int half = e / 128, plane = (e / 32) % 4, m = e % 32;
      const int q = (b.qs[half * 32 + m] >> (2 * plane)) & 3;
      const uint8_t sc = b.scales[e / 16];
      const float dl = d * float(sc & 0x0f);
      const float ml = dmin * float(sc >> 4);
      dst[e] = dl * float(q) - ml;
    }
  }
}

void row_q3_k(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ3_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i, dst += kQK_K) {
    const BlockQ3_K& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    float dl[16];
    for (int k = 0; k < 16; ++k) {
      // Low 4 bits: nibbles of bytes 0-7; high 2 bits: 2-bit fields of bytes 8-11.
      const int low = (b.scales[k % 8] >> (4 * (k / 8))) & 0x0f;
      const int high = (b.scales[8 + k % 4] >> (2 * (k / 4))) & 0x03;
      dl[k] = d * float((low | (high << 4)) - 32);
    }
    for (int e = 0; e < kQK_K; ++e) {
      const int half = e / 128, plane = (e / 32) % 4, m = e % 32;
      const int low = (b.qs[half * 32 + m] >> (2 * plane)) & 3;
      // The high bit is stored inverted: a clear bit subtracts 4.
      const int high_clear = ((b.hmask[m] >> (e / 32)) & 1) ^ 1;
      dst[e] = dl[e / 16] * float(low - (high_clear << 2));
    }
  }
}

void row_q4_k(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ4_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i, dst += kQK_K) {
    const BlockQ4_K& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    const float dmin = fp16_to_fp32(b.dmin);
    for (int sub = 0; sub < 8; ++sub) {
      uint8_t sc, mn;
      unpack_scale_min(b.scales, sub, sc, mn);
      const float dl = d * float(sc);
      const float ml = dmin * float(mn);
      // Sub-blocks 2c and 2c+1 are the low and high nibbles of bytes 32c .. 32c+31.
      const uint8_t* qs = b.qs + 32 * (sub / 2);
      const int shift = 4 * (sub % 2);
      for (int m = 0; m < 32; ++m) dst[sub * 32 + m] = dl * float((qs[m] >> shift) & 0x0f) - ml;
    }
  }
}

void row_q5_k(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ5_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i, dst += kQK_K) {
    const BlockQ5_K& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    const float dmin = fp16_to_fp32(b.dmin);
    for (int sub = 0; sub < 8; ++sub) {
      uint8_t sc, mn;
      unpack_scale_min(b.scales, sub, sc, mn);
      const float dl = d * float(sc);
      const float ml = dmin * float(mn);
      const uint8_t* qs = b.qs + 32 * (sub / 2);
      const int shift = 4 * (sub % 2);
      for (int m = 0; m < 32; ++m) {
        const int q = ((qs[m] >> shift) & 0x0f) | (((b.qh[m] >> sub) & 1) << 4);
        dst[sub * 32 + m] = dl * float(q) - ml;
      }
    }
  }
}

void row_q6_k(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ6_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i, dst += kQK_K) {
    const BlockQ6_K& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    for (int e = 0; e < kQK_K; ++e) {
      const int half = e / 128, r = e % 128;
      // Low nibbles: 64 bytes per half, low then high nibble. High pairs: 32 bytes per half,
      // four 2-bit planes.
      const int low = (b.ql[half * 64 + r % 64] >> (4 * (r / 64))) & 0x0f;
      const int high = (b.qh[half * 32 + r % 32] >> (2 * (r / 32))) & 0x03;
      const float dl = d * float(b.scales[e / 16]);
      dst[e] = dl * float((low | (high << 4)) - 32);
    }
  }
}

namespace {

// A TQ1_0 byte holds 5 base-3 digits as a fixed-point fraction of 243; multiplying by 3^k
// (mod 256) brings digit k to the top, and (byte * 3) >> 8 reads it.
float ternary_digit(uint8_t byte, uint8_t power_of_3) {
  const uint8_t shifted = uint8_t(byte * power_of_3);
  return float(((uint16_t(shifted) * 3) >> 8) - 1);
}

}  // namespace

void row_tq1_0(const void* src, float* dst, int64_t n) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const auto* blocks = static_cast<const BlockTQ1_0*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i, dst += kQK_K) {
    const BlockTQ1_0& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    float* out = dst;
    for (int k = 0; k < 5; ++k)  // bytes 0-31: 160 elements
      for (int m = 0; m < 32; ++m) *out++ = d * ternary_digit(b.qs[m], kPow3[k]);
    for (int k = 0; k < 5; ++k)  // bytes 32-47: 80 elements
      for (int m = 0; m < 16; ++m) *out++ = d * ternary_digit(b.qs[32 + m], kPow3[k]);
    for (int k = 0; k < 4; ++k)  // qh: 4 digits per byte, the last 16 elements
      for (int m = 0; m < 4; ++m) *out++ = d * ternary_digit(b.qh[m], kPow3[k]);
  }
}

void row_tq2_0(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockTQ2_0*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i, dst += kQK_K) {
    const BlockTQ2_0& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    for (int e = 0; e < kQK_K; ++e) {
      const int half = e / 128, plane = (e / 32) % 4, m = e % 32;
      dst[e] = d * float(((b.qs[half * 32 + m] >> (2 * plane)) & 3) - 1);
    }
  }
}

}  // namespace sluice::dequant
