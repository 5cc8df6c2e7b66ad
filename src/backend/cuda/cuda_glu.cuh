// Internal to backend/cuda: one GLU element, act(g) * u, in CpuBackend's order of float
// operations — shared by glu_kernel (cuda_elementwise.cu) and the fused GLU + activation
// quantization of the down product (cuda_glu_quantize.cu), so both give the same bits.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "backend/backend.h"
#include "backend/cuda/cuda_math.cuh"

namespace sluice::cuda {

__device__ __forceinline__ float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoefA = 0.044715f;
  const float inner = __fadd_rn(1.0f, __fmul_rn(__fmul_rn(kCoefA, x), x));
  const float t = libm_tanhf(__fmul_rn(__fmul_rn(kSqrt2OverPi, x), inner));
  return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, t));
}

// act(g) * u for the element in column `col` of its row; columns below `n_vector` take the
// polynomial exp in SwiGLU (cpu::swiglu_rows: groups of eight from each row's start). `table`:
// the CPU's f16 GELU table on the device (kGeluTanhF16 only).
template <GluActivation kAct>
__device__ __forceinline__ float glu_value(float g, float u, int64_t col, int64_t n_vector,
                                           const uint16_t* table) {
  if constexpr (kAct == GluActivation::kSilu) {
    const float e = col < n_vector ? exp_polynomial(__fsub_rn(0.0f, g)) : libm_expf(-g);
    return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, e)), u);
  } else if constexpr (kAct == GluActivation::kGeluTanh) {
    return __fmul_rn(gelu_tanh(g), u);
  } else if constexpr (kAct == GluActivation::kGeluTanhF16) {
    float a;
    if (g <= -10.0f) {
      a = 0.0f;
    } else if (g >= 10.0f) {
      a = g;
    } else {
      a = __half2float(__ushort_as_half(table[__half_as_ushort(__float2half_rn(g))]));
    }
    return __fmul_rn(a, u);
  } else {
    // gpt-oss: x = std::min(g, 7), y = std::clamp(u, -7, 7), alpha 1.702 (cpu::swiglu_oai).
    constexpr float kLimit = 7.0f;
    constexpr float kAlpha = 1.702f;
    const float x = kLimit < g ? kLimit : g;
    const float y = u < -kLimit ? -kLimit : (kLimit < u ? kLimit : u);
    const float glu = __fdiv_rn(x, __fadd_rn(1.0f, libm_expf(__fmul_rn(kAlpha, -x))));
    return __fmul_rn(glu, __fadd_rn(y, 1.0f));
  }
}

}  // namespace sluice::cuda
