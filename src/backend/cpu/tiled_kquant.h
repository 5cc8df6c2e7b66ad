// The batched matmul of the K-quant and IQ weight types (the Q8_K-activation types) as
// llama.cpp b11549 computes it on AVX2 once a batch has 8 or more tokens: its "tiled" path,
// not one ggml_vec_dot call per (row, token). Its numbers differ from the dot products in the
// last bits, and only running the same float steps gives llama.cpp's logits bit for bit.
//
// The arithmetic, per weight row, token and 256-element block b, in this order:
//   s1  = sum over 16-element groups g of scale_g * sum_{e in g} w_e * q_e   (exact integer)
//   s2  = sum over g of min_g * bsum_g                                       (exact integer)
//   res = d0 * float(s1);  res = res - dmin * float(s2)  (one fused step; types with minimums)
//   acc = fma(res, d_x, acc)                              (acc starts at 0, blocks in order)
// (llama.cpp's AVX-512 VNNI kernel ends with acc + res * d_x, multiplied and added apart: see
// TiledAccumulate) where w_e is the weight's signed integer value, d0 its block scale (times ggml's
// 1/8 or 1/4 for the IQ grids), q_e and d_x the Q8_K activation. The dot product instead scales
// each block by d0 * d_x, so the two round differently. Integer sums are exact, so how they are
// formed is free; the float steps are not. Each output element depends only on its row and
// token, never on the thread split or the tiling.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/qtype.h"

namespace sluice::cpu {

// llama.cpp takes the tiled path from this many tokens (src1->ne[1]) up.
inline constexpr int64_t kTiledMinTokens = 8;

// The weight types llama.cpp b11549 tiles: Q2_K..Q6_K, IQ4_XS and the IQ grid types.
bool tiled_kquant_type(QType weight);

// Whether CpuBackend::matmul takes the tiled path: a tiled type, n_tokens >= kTiledMinTokens
// and a CPU that runs the AVX2 kernels (llama.cpp's numbers are those of its AVX2 build).
bool use_tiled_kquant(QType weight, int64_t n_tokens);

// The last step: llama.cpp's AVX2 kernel fuses it, its AVX-512 VNNI kernel rounds the product
// first. The CPU's best ISA picks the one its llama.cpp build would run (tiled_accumulate()).
enum class TiledAccumulate : uint8_t { kFused, kMultiplyThenAdd };
TiledAccumulate tiled_accumulate();

// Size of the packed activations pack_tiled_activations_avx2 writes.
size_t tiled_activation_bytes(int64_t n_tokens, int64_t n_cols);

// Rearranges n_tokens Q8_K rows (act_row bytes apart) into the layout the kernel reads:
// per 256-element block, groups of 8 tokens (the last padded with zero tokens).
// Precondition: tiled_kquant_type(weight), n_cols % 256 == 0, AVX2 supported.
void pack_tiled_activations_avx2(QType weight, const uint8_t* x_q8k, int64_t act_row,
                                 int64_t n_tokens, int64_t n_cols, uint8_t* packed);

// y[t * y_stride + r] for weight rows [row_lo, row_hi) (w_row bytes apart from `weights`,
// row 0 first) and every token, from activations packed as above.
void tiled_kquant_rows_avx2(QType weight, const uint8_t* weights, int64_t w_row, int64_t row_lo,
                            int64_t row_hi, const uint8_t* packed, int64_t n_tokens, int64_t n_cols,
                            float* y, int64_t y_stride, TiledAccumulate accumulate);

}  // namespace sluice::cpu
