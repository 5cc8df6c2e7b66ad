// The numeric core of the K-quant quantizers: for one 256-element super-block, the fp16
// super-scales, the integer sub-block codes and the integer levels that minimise squared
// reconstruction error. Two shapes cover all five types; packing the results into bytes is
// quantize_k.cpp's job, and this file knows no block layout.
#pragma once

#include <cstdint>

namespace sluice::kquant {

inline constexpr int kSuperBlock = 256;
inline constexpr int kMaxSubBlocks = 16;

// Q2_K, Q4_K, Q5_K: x[i] ~ d * sc[j] * q[i] - dmin * mc[j], with q in [0, q_max] and the
// codes sc, mc in [0, code_max]; j = i / sub_size.
struct AffineSpec {
  int sub_size;      // 16 or 32
  int q_max;         // 3, 15, 31
  int code_max;      // 15 or 63
  int scale_radius;  // how far from the float fit the sub-block scale code search reaches
};

struct AffineFit {
  uint16_t d = 0, dmin = 0;        // fp16 bits, exactly as stored
  uint8_t sc[kMaxSubBlocks] = {};  // scale codes
  uint8_t mc[kMaxSubBlocks] = {};  // min codes
  uint8_t q[kSuperBlock] = {};     // levels in [0, q_max], element order
};

// Q3_K, Q6_K: x[i] ~ d * sc[j] * q[i], with q in [q_min, q_max] and sc in
// [code_min, code_max] (both ranges one wider on the negative side).
struct SymmetricSpec {
  int sub_size;            // 16
  int q_min, q_max;        // -4..3 or -32..31
  int code_min, code_max;  // -32..31 or -128..127
  int scale_radius;
};

struct SymmetricFit {
  uint16_t d = 0;
  int8_t sc[kMaxSubBlocks] = {};
  int8_t q[kSuperBlock] = {};  // signed levels in [q_min, q_max]
};

// Both take the 256 floats of one super-block. Deterministic; no allocation. Non-finite
// input gives some valid encoding (never undefined behaviour), not a meaningful one.
void fit_affine(const float* x, const AffineSpec& spec, AffineFit& out);
void fit_symmetric(const float* x, const SymmetricSpec& spec, SymmetricFit& out);

}  // namespace sluice::kquant
