// Softmax of one row as llama.cpp's x86 CPU backend computes it (ggml_compute_forward_soft_max):
// max, then e^(x - max) by the polynomial on groups of eight (libm's expf on the rest), the sum
// in double with each group of eight reduced in float first, then a multiply by the float
// reciprocal. The MoE router selects experts on these values, so ties break the same way.
#pragma once

#include <cstdint>

namespace sluice::cpu {

void softmax_row(float* x, int64_t n);

}  // namespace sluice::cpu
