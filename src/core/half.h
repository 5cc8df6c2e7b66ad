// Scalar conversions between float32 and the 16-bit float formats (IEEE half, bfloat16).
// They must round exactly as ggml and numpy do (round to nearest, ties to even), because
// quantizers store scales as halves and bit-exactness with llama.cpp depends on it.
#pragma once

#include <bit>
#include <cstdint>

namespace sluice {

inline float fp32_from_bits(uint32_t bits) {
  return std::bit_cast<float>(bits);
}
inline uint32_t fp32_to_bits(float value) {
  return std::bit_cast<uint32_t>(value);
}

// Exact: every half is representable as a float.
inline float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  if (exponent == 0x1f) return fp32_from_bits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return fp32_from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13));
  // Subnormal half: mantissa * 2^-24, exact in float.
  const float magnitude = float(mantissa) * 0x1p-24f;
  return sign ? -magnitude : magnitude;
}

// Round to nearest even; overflow goes to infinity, NaN stays NaN (quiet).
inline uint16_t fp32_to_fp16(float value) {
  const uint32_t bits = fp32_to_bits(value);
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return uint16_t(sign | 0x7e00);   // NaN
  if (abs_bits >= 0x477ff000u) return uint16_t(sign | 0x7c00);  // rounds to >= 65536: inf
  if (abs_bits < 0x38800000u) {
    // Result is a half subnormal (or zero): scale so the integer part is the half mantissa.
    const float magnitude = fp32_from_bits(abs_bits) * 0x1p24f;
    // Adding 2^23 makes the FPU round to an integer with ties-to-even.
    const uint32_t rounded = fp32_to_bits(magnitude + 0x1p23f) - 0x4b000000u;
    return uint16_t(sign | rounded);
  }
  // Normal: drop 13 mantissa bits with round-to-nearest-even; a carry correctly bumps the exponent.
  const uint32_t rebased = abs_bits - (112u << 23);
  const uint32_t round_bit = (rebased >> 13) & 1u;
  return uint16_t(sign | ((rebased + 0xfffu + round_bit) >> 13));
}

inline float bf16_to_fp32(uint16_t h) {
  return fp32_from_bits(uint32_t(h) << 16);
}

// As ggml's GGML_FP32_TO_BF16: NaN becomes a quiet NaN, otherwise round to nearest even.
inline uint16_t fp32_to_bf16(float value) {
  const uint32_t bits = fp32_to_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 64);
  return uint16_t((bits + (0x7fffu + ((bits >> 16) & 1u))) >> 16);
}

}  // namespace sluice
