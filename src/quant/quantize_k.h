// Quantizers for the K-quant types Q2_K … Q6_K: float rows to blocks laid out byte for byte as
// GGUF stores them, so llama.cpp and gguf-py read them. Our own search (quantize_k_fit.h)
// minimising plain squared error; no importance matrix. Knows nothing of files or tensors.
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace sluice {

// `n` floats from `src` into n / 256 blocks at `dst`. Precondition: n is a multiple of 256
// (kQK_K); a violation fails with sluice::Error. Deterministic: the same input always gives
// the same bytes.
void quantize_row_q2_k(const float* src, BlockQ2_K* dst, int64_t n);
void quantize_row_q3_k(const float* src, BlockQ3_K* dst, int64_t n);
void quantize_row_q4_k(const float* src, BlockQ4_K* dst, int64_t n);
void quantize_row_q5_k(const float* src, BlockQ5_K* dst, int64_t n);
void quantize_row_q6_k(const float* src, BlockQ6_K* dst, int64_t n);

}  // namespace sluice
