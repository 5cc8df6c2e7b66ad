// Internal to backend/cpu: the kernel table the ISA files fill. A plain aggregate on purpose:
// it is written from files compiled with AVX2/AVX-512 flags, and an inline member function
// compiled there could be the copy the linker keeps for baseline code (an ODR trap).
#pragma once

#include "backend/cpu/vec_dot.h"

namespace sluice::cpu {

inline constexpr int kVecDotSlots = 40;  // QType ids 0..39 (MXFP4 = 39) may have kernels

struct VecDotTable {
  VecDotKernel kernels[kVecDotSlots];  // [QType id]
};

// Each overwrites the entries of the types its file implements. Call only when
// isa_supported() says the CPU runs that ISA: even filling the table runs code built for it.
void add_avx2_block32_kernels(VecDotTable& table);    // vec_dot_q_avx2.cpp
void add_avx2_kquant_kernels(VecDotTable& table);     // vec_dot_k_avx2.cpp
void add_avx2_float_kernels(VecDotTable& table);      // vec_dot_f_avx2.cpp
void add_avx2_iq_kernels(VecDotTable& table);         // vec_dot_iq_avx2.cpp
void add_avx512_block32_kernels(VecDotTable& table);  // vec_dot_q_avx512.cpp
void add_avx512_kquant_kernels(VecDotTable& table);   // vec_dot_k_avx512.cpp
void add_avx512_float_kernels(VecDotTable& table);    // vec_dot_f_avx512.cpp

// The FP8 block-scaled row kernels (fp8_dot.h's Fp8DotFn), outside the table because their
// signature differs; the same rule holds: call only when isa_supported() says yes.
float vec_dot_fp8_e4m3_avx2(const uint8_t* w_row, const float* block_scales, const float* x,
                            int64_t n, int64_t block);  // vec_dot_fp8_avx2.cpp
float vec_dot_fp8_e4m3_avx512(const uint8_t* w_row, const float* block_scales, const float* x,
                              int64_t n, int64_t block);  // vec_dot_fp8_avx512.cpp

}  // namespace sluice::cpu
