// Random test rows for the dot-product tests: weight rows of any type made of random bytes
// with finite, moderate scales (every bit pattern of the quants is exercised, as llama.cpp's
// test-quantize-fns does with its data), and activation rows quantized from random floats by
// quant/'s reference quantizers (so Q8_1's s and Q8_K's bsums are consistent).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "quant/qtype.h"

namespace sluice::test {

// n_rows rows of `type`, row_bytes(type, n_cols) each, back to back.
std::vector<uint8_t> random_weight_rows(QType type, int64_t n_rows, int64_t n_cols,
                                        std::mt19937& rng);

// One activation row: random floats in [-1, 1] quantized to `type`.
std::vector<uint8_t> random_activation_row(QType type, int64_t n_cols, std::mt19937& rng);

// The exact dot product of the dequantized rows (float64) and sum |w_i x_i|, the scale the
// tolerances are stated against.
struct ExactDot {
  double value;
  double magnitude;
};
ExactDot exact_dot(QType weight_type, const void* w, QType activation_type, const void* x,
                   int64_t n_cols);

// Every weight type with a dot product, in QType id order.
std::vector<QType> dot_weight_types();

}  // namespace sluice::test
