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

}  // namespace sluice
