// Scalar reference dequantization: one row of any QType to float32, bit for bit what
// gguf-py's numpy code and ggml's to_float produce. It is the specification the backend
// kernels are tested against, so it favours plainness over speed. Knows nothing of files.
#pragma once

#include <cstdint>

#include "quant/qtype.h"

namespace sluice {

// A row kernel: `n_elements` (a multiple of the type's block size) from `src` to `dst`.
using DequantizeFn = void (*)(const void* src, float* dst, int64_t n_elements);

// The row kernel of `type`; every type in the QType table has one.
DequantizeFn dequantizer_of(QType type);

// Dequantizes a row. Precondition: n_elements is a multiple of the block size (callers
// validate shapes first); `src` holds row_bytes(type, n_elements) bytes, aligned as the
// block struct (2 bytes for the half-scaled blocks, 4 for Q8_K). Fails on a misuse.
void dequantize_row(QType type, const void* src, float* dst, int64_t n_elements);

// FP8 checkpoints with block scales (DeepSeek V3, GLM 4.5 FP8): `weight` is a row-major
// [rows, cols] E4M3 matrix and `scale_inv` a row-major float32 [ceil(rows/block_rows),
// ceil(cols/block_cols)] matrix; dst[r, c] = e4m3(weight[r, c]) * scale_inv[r/br, c/bc].
void dequantize_fp8_block_scaled(const uint8_t* weight, const float* scale_inv, float* dst,
                                 int64_t rows, int64_t cols, int64_t block_rows = 128,
                                 int64_t block_cols = 128);

}  // namespace sluice
