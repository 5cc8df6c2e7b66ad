// swiglu_rows, the GELUs and swiglu_oai (see silu.h). Written element-wise with
// explicit fused multiply-adds so any compiler and ISA give the vector algorithm's exact results.
#include "backend/cpu/silu.h"

#include "backend/cpu/exp_polynomial.h"
#include "backend/cpu/vec_dot.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/half.h"

namespace sluice::cpu {

void swiglu_rows(float* gate, const float* up, int64_t n_rows, int64_t n_cols) {
  static const bool avx2 = isa_supported(CpuIsa::kAvx2);
  if (avx2) return swiglu_rows_avx2(gate, up, n_rows, n_cols);
  swiglu_rows_scalar(gate, up, n_rows, n_cols);
}

void swiglu_rows_scalar(float* gate, const float* up, int64_t n_rows, int64_t n_cols) {
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

// The GELU of every half-precision input, rounded to half: ggml's own table, built once on
// first use from the same formula (a 128 KiB lookup instead of a tanh per element).
const uint16_t* gelu_f16_table() {
  static const std::vector<uint16_t> table = [] {
    std::vector<uint16_t> t(65536);
    for (uint32_t h = 0; h < t.size(); ++h) {
      t[h] = fp32_to_fp16(gelu_tanh_fused(fp16_to_fp32(uint16_t(h))));
    }
    return t;
  }();
  return table.data();
}

void geglu_f16_rows(float* gate, const float* up, int64_t n) {
  const uint16_t* table = gelu_f16_table();
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    float g;
    if (x <= -10.0f) {
      g = 0.0f;
    } else if (x >= 10.0f) {
      g = x;
    } else {
      g = fp16_to_fp32(table[fp32_to_fp16(x)]);
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
