// Half-precision row kernels of the F16 KV cache's attention: float32 -> half conversion, the
// half dot product, and the half accumulator updates of an online softmax (y = half(x * v + y),
// y = half(y * v)). They follow ggml's CPU flash-attention arithmetic — four 8-lane fused
// accumulators reduced pairwise for the dot, accumulators kept in half — because llama.cpp's
// default context runs that path, and matching it keeps greedy decoding on llama.cpp's tokens.
// A scalar version emulates the same order exactly; an AVX2/F16C one is chosen when available.
#pragma once

#include <cstdint>

namespace sluice::cpu {

struct HalfRowKernels {
  void (*to_half)(const float* x, uint16_t* y, int64_t n);
  float (*dot)(const uint16_t* a, const uint16_t* b, int64_t n);
  void (*mad)(uint16_t* y, const uint16_t* x, float v, int64_t n);  // y = half(fma(x, v, y))
  void (*scale)(uint16_t* y, float v, int64_t n);                   // y = half(y * v)
};

const HalfRowKernels& half_row_kernels();

// The AVX2 + F16C versions (f16_rows_avx2.cpp); call only when the CPU has AVX2.
void fp32_to_fp16_row_avx2(const float* x, uint16_t* y, int64_t n);
float dot_f16_avx2(const uint16_t* a, const uint16_t* b, int64_t n);
void mad_f16_avx2(uint16_t* y, const uint16_t* x, float v, int64_t n);
void scale_f16_avx2(uint16_t* y, float v, int64_t n);

}  // namespace sluice::cpu
