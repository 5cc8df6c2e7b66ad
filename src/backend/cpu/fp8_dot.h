// The CPU dot product and decode-time matvec of FP8 block-scaled weights (E4M3 with one float32
// factor per 128 x 128 block: DeepSeek V3 / GLM FP8 checkpoints' `weight_scale_inv`) against
// float32 activations. Kept apart from the vec_dot table: the activation is plain float and the
// scales sit beside the weights rather than inside blocks. One kernel per ISA (scalar is the
// quant/ reference), chosen as vec_dot's are; each row is one kernel call.
#pragma once

#include <cstdint>

#include "backend/cpu/vec_dot.h"
#include "core/thread_pool.h"

namespace sluice::cpu {

// One row, as vec_dot_fp8_e4m3_block_scaled_reference (quant/dot_reference.h) defines it:
// w_row [n] E4M3, block_scales [ceil(n / block)], x [n] float32; any n >= 0, block >= 1, any
// alignment. SIMD kernels validate nothing (matvec does); an E4M3 NaN code gives NaN.
using Fp8DotFn = float (*)(const uint8_t* w_row, const float* block_scales, const float* x,
                           int64_t n, int64_t block);

struct Fp8DotKernel {
  Fp8DotFn fn = nullptr;
  CpuIsa isa = CpuIsa::kScalar;
};

// The kernel for `isa` (scalar, AVX2 and AVX-512 each have their own). Fails when
// !isa_supported(isa).
Fp8DotKernel fp8_e4m3_dot_kernel(CpuIsa isa);

inline constexpr int64_t kFp8BlockSize = 128;  // rows and columns per scale, as the checkpoints

// y = W x with blocks of kFp8BlockSize x kFp8BlockSize:
//   w:         [rows, cols] E4M3 bytes, row-major
//   scale_inv: [ceil(rows / 128), ceil(cols / 128)] float32, row-major
//   x:         [cols] float32
//   y:         [rows] float32
// cols need not be a multiple of 128 (the last block of a row is short). `pool` may be nullptr;
// results are bit-identical for any thread count. Fails on negative shapes.
void matvec_fp8_e4m3_block_scaled(const uint8_t* w, const float* scale_inv, const float* x,
                                  float* y, int64_t rows, int64_t cols, ThreadPool* pool);

// As above with an explicit ISA (tests compare ISAs). Fails when !isa_supported(isa).
void matvec_fp8_e4m3_block_scaled(const uint8_t* w, const float* scale_inv, const float* x,
                                  float* y, int64_t rows, int64_t cols, ThreadPool* pool,
                                  CpuIsa isa);

}  // namespace sluice::cpu
