// Row kernels of the 32-element block types (Q4_0 … Q8_1, IQ4_NL, MXFP4), of Q8_K, and of the
// small-scale-per-block types NVFP4 and Q1_0.
// Each product is written in the order gguf-py evaluates it (d * q, then + m): float
// multiplication commutes, but a changed grouping or a fused multiply-add would not be bit-exact.
#include <cstring>

#include "core/half.h"
#include "quant/blocks.h"
#include "quant/dequantize_kernels.h"
#include "quant/float_formats.h"
#include "quant/iq_tables.h"

namespace sluice::dequant {

void row_q4_0(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < n / kQK4_0; ++i, dst += kQK4_0) {
    const float d = fp16_to_fp32(blocks[i].d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      dst[j] = d * float((blocks[i].qs[j] & 0x0f) - 8);
      dst[j + kQK4_0 / 2] = d * float((blocks[i].qs[j] >> 4) - 8);
    }
  }
}

void row_q4_1(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ4_1*>(src);
  for (int64_t i = 0; i < n / kQK4_1; ++i, dst += kQK4_1) {
    const float d = fp16_to_fp32(blocks[i].d);
    const float m = fp16_to_fp32(blocks[i].m);
    for (int j = 0; j < kQK4_1 / 2; ++j) {
      dst[j] = d * float(blocks[i].qs[j] & 0x0f) + m;
      dst[j + kQK4_1 / 2] = d * float(blocks[i].qs[j] >> 4) + m;
    }
  }
}

namespace {

// The 32 fifth bits of a Q5 block, bit j for element j (stored little-endian).
uint32_t high_bits(const uint8_t (&qh)[4]) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  return bits;
}

}  // namespace

void row_q5_0(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ5_0*>(src);
  for (int64_t i = 0; i < n / kQK5_0; ++i, dst += kQK5_0) {
    const float d = fp16_to_fp32(blocks[i].d);
    const uint32_t qh = high_bits(blocks[i].qh);
    for (int j = 0; j < kQK5_0 / 2; ++j) {
      const int lo = (blocks[i].qs[j] & 0x0f) | int(((qh >> j) & 1) << 4);
      const int hi = (blocks[i].qs[j] >> 4) | int(((qh >> (j + 16)) & 1) << 4);
      dst[j] = d * float(lo - 16);
      dst[j + kQK5_0 / 2] = d * float(hi - 16);
    }
  }
}

void row_q5_1(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ5_1*>(src);
  for (int64_t i = 0; i < n / kQK5_1; ++i, dst += kQK5_1) {
    const float d = fp16_to_fp32(blocks[i].d);
    const float m = fp16_to_fp32(blocks[i].m);
    const uint32_t qh = high_bits(blocks[i].qh);
    for (int j = 0; j < kQK5_1 / 2; ++j) {
      const int lo = (blocks[i].qs[j] & 0x0f) | int(((qh >> j) & 1) << 4);
      const int hi = (blocks[i].qs[j] >> 4) | int(((qh >> (j + 16)) & 1) << 4);
      dst[j] = d * float(lo) + m;
      dst[j + kQK5_1 / 2] = d * float(hi) + m;
    }
  }
}

void row_q8_0(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / kQK8_0; ++i, dst += kQK8_0) {
    const float d = fp16_to_fp32(blocks[i].d);
    for (int j = 0; j < kQK8_0; ++j) dst[j] = float(blocks[i].qs[j]) * d;
  }
}

// Q8_1 is an activation format: the stored s (= d * sum of qs) only speeds up dot products.
void row_q8_1(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ8_1*>(src);
  for (int64_t i = 0; i < n / kQK8_1; ++i, dst += kQK8_1) {
    const float d = fp16_to_fp32(blocks[i].d);
    for (int j = 0; j < kQK8_1; ++j) dst[j] = d * float(blocks[i].qs[j]);
  }
}

void row_q8_k(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ8_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i, dst += kQK_K) {
    for (int j = 0; j < kQK_K; ++j) dst[j] = blocks[i].d * float(blocks[i].qs[j]);
  }
}

void row_iq4_nl(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIQ4_NL*>(src);
  for (int64_t i = 0; i < n / kQK4_NL; ++i, dst += kQK4_NL) {
    const float d = fp16_to_fp32(blocks[i].d);
    for (int j = 0; j < kQK4_NL / 2; ++j) {
      dst[j] = d * float(kValuesIq4nl[blocks[i].qs[j] & 0x0f]);
      dst[j + kQK4_NL / 2] = d * float(kValuesIq4nl[blocks[i].qs[j] >> 4]);
    }
  }
}

void row_mxfp4(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockMXFP4*>(src);
  for (int64_t i = 0; i < n / kQK_MXFP4; ++i, dst += kQK_MXFP4) {
    const float d = e8m0_to_fp32_half(blocks[i].e);
    for (int j = 0; j < kQK_MXFP4 / 2; ++j) {
      dst[j] = d * float(kValuesMxfp4[blocks[i].qs[j] & 0x0f]);
      dst[j + kQK_MXFP4 / 2] = d * float(kValuesMxfp4[blocks[i].qs[j] >> 4]);
    }
  }
}

// Four sub-blocks of 16, each with its own UE4M3 scale; within sub-block s, byte s*8 + j holds
// element j (low nibble) and element j + 8 (high nibble).
void row_nvfp4(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockNVFP4*>(src);
  constexpr int kSubBlocks = kQK_NVFP4 / kQK_NVFP4_SUB;
  constexpr int kHalf = kQK_NVFP4_SUB / 2;
  for (int64_t i = 0; i < n / kQK_NVFP4; ++i) {
    for (int s = 0; s < kSubBlocks; ++s, dst += kQK_NVFP4_SUB) {
      const float d = ue4m3_to_fp32_half(blocks[i].d[s]);
      const uint8_t* qs = blocks[i].qs + s * kHalf;
      for (int j = 0; j < kHalf; ++j) {
        dst[j] = d * float(kValuesMxfp4[qs[j] & 0x0f]);
        dst[j + kHalf] = d * float(kValuesMxfp4[qs[j] >> 4]);
      }
    }
  }
}

// One sign bit per element (ggml's dequantize_row_q1_0): set gives d, clear gives -d.
void row_q1_0(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ1_0*>(src);
  for (int64_t i = 0; i < n / kQK1_0; ++i, dst += kQK1_0) {
    const float d = fp16_to_fp32(blocks[i].d);
    for (int j = 0; j < kQK1_0; ++j) dst[j] = ((blocks[i].qs[j / 8] >> (j % 8)) & 1) ? d : -d;
  }
}

}  // namespace sluice::dequant
