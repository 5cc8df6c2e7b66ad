// e^x as llama.cpp's x86 CPU backend computes it on groups of eight elements (ggml_v_expf: the
// "optimized routines" polynomial of Arm, max error about 1.5 ulp), one element at a time. SiLU,
// softmax and flash attention all use it where ggml does, so their results match bit for bit.
#pragma once

namespace sluice::cpu {

// e^x by the polynomial method (one element of the 8-lane algorithm; overflow and underflow
// handled as there: above ~88.7 gives infinity, below ~-103.9 zero).
float exp_polynomial(float x);

}  // namespace sluice::cpu
