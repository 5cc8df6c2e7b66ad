// The quantizers of activation rows the CPU matmul uses. For Q8_0 and Q8_1 they follow the
// arithmetic of ggml's x86 CPU backend (scale 127 / amax, round half to even) rather than the
// reference quantizers in quant/ (scale 1 / (amax / 127), round half away): the two differ in
// the last bit of some quants, and a model's greedy path can hinge on one such bit, so running
// what llama.cpp runs keeps Sluice on llama.cpp's path. Other types use the quant/ reference.
#pragma once

#include <cstdint>

#include "backend/cpu/vec_dot.h"
#include "quant/quantize.h"

namespace sluice::cpu {

// The quantizer of `activation_type`: for Q8_0 / Q8_1 the AVX2 one where the CPU has it (the
// same bytes). With `isa`: kScalar the scalar loops, kAvx2 or kAvx512 the AVX2 ones (the tests
// compare them; isa_supported(kAvx2) must hold for the latter).
QuantizeFn activation_quantizer(QType activation_type);
QuantizeFn activation_quantizer(QType activation_type, CpuIsa isa);

void quantize_activations_q8_0(const float* src, void* dst, int64_t n);
void quantize_activations_q8_1(const float* src, void* dst, int64_t n);
// activation_quantize_avx2.cpp.
void quantize_activations_q8_0_avx2(const float* src, void* dst, int64_t n);
void quantize_activations_q8_1_avx2(const float* src, void* dst, int64_t n);

}  // namespace sluice::cpu
