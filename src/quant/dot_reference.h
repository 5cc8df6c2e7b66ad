// Scalar reference dot products: one weight row against one activation row quantized in the
// activation type ggml pairs with the weight type (Q8_0, Q8_1 or Q8_K; the float types pair
// with themselves). The math is ggml's generic vec_dot: integer sums inside a block, float
// scales applied per block, blocks accumulated in order. It is the specification the SIMD
// kernels in backend/ are tested against; it knows nothing of threads, ISAs or tensors.
#pragma once

#include <cstdint>
#include <optional>

#include "quant/qtype.h"

namespace sluice {

// A row dot product of `n_elements` (a multiple of the weight type's block size): `weight`
// holds row_bytes(weight_type, n) bytes, `activation` row_bytes(activation_type_for(...), n).
using VecDotFn = float (*)(const void* weight, const void* activation, int64_t n_elements);

// The activation format the dot product of `weight` reads; nullopt for types without one.
std::optional<QType> activation_type_for(QType weight);

// The reference kernel of `weight`; nullptr for types without a dot product.
VecDotFn vec_dot_reference_of(QType weight);

// Computes the dot product through the reference kernel. Fails when the type has no dot
// product or n_elements is not a multiple of its block size.
float vec_dot_reference(QType weight_type, const void* weight, const void* activation,
                        int64_t n_elements);

// FP8 block-scaled checkpoints (DeepSeek V3, GLM 4.5 FP8): E4M3 weights, one float32 factor per
// block of `block` columns (the checkpoint's `weight_scale_inv`, which dequantization multiplies
// by), against float32 activations. Per block, the products decode(w) * x are rounded to float
// and summed in element order; the block sum times its scale is then added to the row sum,
// blocks in order: sum = ((0 + s0 * S0) + s1 * S1) + ..., products and sums rounded to float
// one at a time. An E4M3 NaN code (0x7F, 0xFF) anywhere in the row makes the result NaN.
//   w_row:        [n] E4M3 bytes
//   block_scales: [ceil(n / block)] this row's block scales
//   x:            [n] float32
// Fails when n < 0 or block <= 0. The last block may be short (n need not be a multiple).
float vec_dot_fp8_e4m3_block_scaled_reference(const uint8_t* w_row, const float* block_scales,
                                              const float* x, int64_t n, int64_t block = 128);

// Row `row`'s block scales inside the [ceil(rows / block_rows), ceil(cols / block_cols)]
// row-major scale_inv matrix of a [rows, cols] weight: rows share a scale row per block_rows.
const float* fp8_row_block_scales(const float* scale_inv, int64_t row, int64_t cols,
                                  int64_t block_rows = 128, int64_t block_cols = 128);

// y = W x for a [rows, cols] E4M3 weight with its scale_inv matrix (shapes as above), one
// vec_dot_fp8_e4m3_block_scaled_reference per row. x: [cols] float32, y: [rows].
void matvec_fp8_e4m3_block_scaled_reference(const uint8_t* weight, const float* scale_inv,
                                            const float* x, float* y, int64_t rows, int64_t cols,
                                            int64_t block_rows = 128, int64_t block_cols = 128);

}  // namespace sluice
