// exp_polynomial, swiglu_rows, the GELUs and swiglu_oai (see silu.h). Written element-wise with
// explicit fused multiply-adds so any compiler and ISA give the vector algorithm's exact results.
#include "backend/cpu/silu.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/half.h"

namespace sluice::cpu {

float exp_polynomial(float x) {
  // x = n ln2 + b with n integral: z carries n in its low mantissa bits (round-to-nearest
  // through the 1.5 * 2^23 shift), b is the reduced argument, |b| <= ln2 / 2.
  const float shift = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, shift);
  const float n = z - shift;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  const uint32_t e = std::bit_cast<uint32_t>(z) << 23;
  const float k = std::bit_cast<float>(e + std::bit_cast<uint32_t>(1.0f));  // 2^n
  const float u = b * b;
  // e^b - 1 ~ b * (c0 + c1 b) + b^2 ((c2 + c3 b) + b^2 (c4 + c5 b))
  const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                                    std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                           u, 0x1.ffffecp-1f * b);
  if (!(std::fabs(n) > 126.0f)) return std::fma(j, k, k);
  // 2^n is not a normal float: scale in two steps, or saturate beyond |n| > 192.
  const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
  const float s1 = std::bit_cast<float>(g + 0x7f000000u);
  const float s2 = std::bit_cast<float>(e - g);
  if (std::fabs(n) > 192.0f) return s1 * s1;
  return std::fma(s2, j, s2) * s1;
}

void swiglu_rows(float* gate, const float* up, int64_t n_rows, int64_t n_cols) {
  const int64_t n_vector = n_cols & ~int64_t(7);
  for (int64_t r = 0; r < n_rows; ++r) {
    float* g = gate + r * n_cols;
    const float* u = up + r * n_cols;
    for (int64_t i = 0; i < n_vector; ++i) {
      g[i] = g[i] / (1.0f + exp_polynomial(0.0f - g[i])) * u[i];
    }
    for (int64_t i = n_vector; i < n_cols; ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  }
}

float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoefA = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
}

// The table's GELU as ggml's build computes it: its compiler fuses 1 + a*x*x into one FMA.
float gelu_tanh_fused(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoefA = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * std::fma(kCoefA * x, x, 1.0f)));
}

void geglu_f16_rows(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    float g;
    if (x <= -10.0f) {
      g = 0.0f;
    } else if (x >= 10.0f) {
      g = x;
    } else {
      g = fp16_to_fp32(fp32_to_fp16(gelu_tanh_fused(fp16_to_fp32(fp32_to_fp16(x)))));
    }
    gate[i] = g * up[i];
  }
}

void swiglu_oai(float* gate, const float* up, int64_t n, float alpha, float limit) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = std::min(gate[i], limit);
    const float y = std::clamp(up[i], -limit, limit);
    const float glu = x / (1.0f + std::exp(alpha * (-x)));
    gate[i] = glu * (y + 1.0f);
  }
}

}  // namespace sluice::cpu
