// Scalar decoders of the small float formats that quantized blocks and checkpoints use: E8M0
// shared exponents (MXFP4), unsigned E4M3 scales (NVFP4) and the two OCP FP8 formats (E4M3 "fn",
// E5M2). Bit-level definitions only; the block layouts that carry them live in blocks.h and the row
// kernels in dequantize*.
#pragma once

#include <cstdint>

#include "core/half.h"

namespace sluice {

// Half of 2^(e - 127), the scale of an MXFP4 block. Halved because kValuesMxfp4 holds the E2M1
// values doubled (so they are integers); e < 2 gives the subnormal floats 2^-128 and 2^-127.
inline float e8m0_to_fp32_half(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (uint32_t(e - 1) << 23);
  return fp32_from_bits(bits);
}

// Half of an unsigned E4M3 value (bias 7, no sign bit), the sub-block scale of NVFP4; halved for
// the same reason as e8m0_to_fp32_half. As ggml and gguf-py decode it: 0x00 and 0x7F (the E4M3
// NaN code) give 0; bit 7 is otherwise ignored (0x80 gives 0, 0xFF gives 240).
inline float ue4m3_to_fp32_half(uint8_t b) {
  if (b == 0 || b == 0x7f) return 0.0f;
  const uint32_t exponent = (b >> 3) & 0xf;
  const uint32_t mantissa = b & 0x7;
  if (exponent == 0) return float(mantissa) * 0x1p-10f;  // subnormal m * 2^-9, halved: exact
  // (1 + m/8) * 2^(e - 7) / 2: float exponent field e - 8 + 127.
  return fp32_from_bits(((exponent + 119) << 23) | (mantissa << 20));
}

// OCP E4M3 as torch.float8_e4m3fn: bias 7, no infinities, S.1111.111 is NaN, max 448.
inline float fp8_e4m3_to_fp32(uint8_t b) {
  const uint32_t sign = uint32_t(b & 0x80) << 24;
  const uint32_t exponent = (b >> 3) & 0xf;
  const uint32_t mantissa = b & 0x7;
  if (exponent == 0xf && mantissa == 0x7) return fp32_from_bits(sign | 0x7fc00000u);
  if (exponent == 0) {
    const float magnitude = float(mantissa) * 0x1p-9f;  // subnormal: exact in float
    return sign ? -magnitude : magnitude;
  }
  return fp32_from_bits(sign | ((exponent + 120) << 23) | (mantissa << 20));
}

// OCP E5M2 is IEEE half with the low 8 mantissa bits cut off, infinities and NaNs included.
inline float fp8_e5m2_to_fp32(uint8_t b) {
  return fp16_to_fp32(uint16_t(uint16_t(b) << 8));
}

}  // namespace sluice
