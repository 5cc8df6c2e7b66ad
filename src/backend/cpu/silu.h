// SiLU and GELU as llama.cpp's x86 CPU backend computes it: x / (1 + e^-x) with e^x from a short
// polynomial (the "optimized routines" expf of Arm, max error about 1.5 ulp) on whole groups of
// eight elements, and libm's expf on the remainder of a row. Matching it bit for bit matters:
// SwiGLU outputs are quantized to 8 bits next, and a one-ulp difference can flip a quant.
#pragma once

#include <cstdint>

namespace sluice::cpu {

// gate[i] = silu(gate[i]) * up[i] for rows of n_cols (groups of 8 from each row's start), with
// AVX2 where the CPU has it (the same bits).
void swiglu_rows(float* gate, const float* up, int64_t n_rows, int64_t n_cols);
// The element-wise loop, and the AVX2 one (silu_avx2.cpp; only where isa_supported(kAvx2)):
// what swiglu_rows chooses between, for the tests that compare them.
void swiglu_rows_scalar(float* gate, const float* up, int64_t n_rows, int64_t n_cols);
void swiglu_rows_avx2(float* gate, const float* up, int64_t n_rows, int64_t n_cols);

// tanh-approximated GELU, exactly: 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))).
float gelu_tanh(float x);

// gate[i] = gelu(gate[i]) * up[i] as llama.cpp's CPU backend computes it: 0 below -10, x above
// 10, otherwise the GELU of x rounded to half, itself rounded to half (ggml's lookup table).
void geglu_f16_rows(float* gate, const float* up, int64_t n);

// gate[i] = gpt-oss's clamped SwiGLU of (gate[i], up[i]) as ggml's swiglu_oai computes it:
// x = min(gate, limit), y = clamp(up, -limit, limit), x / (1 + expf(alpha * -x)) * (y + 1),
// element by element with libm's expf (ggml has no vector form of this op).
void swiglu_oai(float* gate, const float* up, int64_t n, float alpha, float limit);

}  // namespace sluice::cpu
