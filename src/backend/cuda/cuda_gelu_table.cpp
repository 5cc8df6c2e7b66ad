// make_gelu_f16_table (cuda_ops.h): the CPU backend's f16 GELU table (cpu/silu.cpp), built the
// same way on the host so the device looks up identical halves. Plain C++20 (core/half.h).
#include <cmath>
#include <cstdint>

#include "core/half.h"

namespace sluice::cuda {

void make_gelu_f16_table(uint16_t* table) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoefA = 0.044715f;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float x = fp16_to_fp32(uint16_t(h));
    // ggml's build fuses 1 + a*x*x into one FMA (cpu/silu.cpp, gelu_tanh_fused).
    const float gelu =
        0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * std::fma(kCoefA * x, x, 1.0f)));
    table[h] = fp32_to_fp16(gelu);
  }
}

}  // namespace sluice::cuda
