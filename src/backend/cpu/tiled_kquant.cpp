// When the tiled K-quant matmul applies and how large its packed activations are; the kernel
// itself is in tiled_kquant_avx2.cpp.
#include "backend/cpu/tiled_kquant.h"

#include "backend/cpu/vec_dot.h"

namespace sluice::cpu {

namespace {

constexpr int64_t kBlock = 256;     // elements per K-quant super-block
constexpr int64_t kGroup = 8;       // tokens per packed group
constexpr int64_t kSegment = 2336;  // bytes per (block, group): see tiled_kquant_avx2.cpp

}  // namespace

bool tiled_kquant_type(QType weight) {
  switch (weight) {
    case QType::Q2_K:
    case QType::Q3_K:
    case QType::Q4_K:
    case QType::Q5_K:
    case QType::Q6_K:
    case QType::IQ4_XS:
    case QType::IQ2_XXS:
    case QType::IQ2_XS:
    case QType::IQ2_S:
    case QType::IQ3_XXS:
    case QType::IQ3_S:
    case QType::IQ1_S:
    case QType::IQ1_M:
      return true;
    default:
      return false;
  }
}

bool use_tiled_kquant(QType weight, int64_t n_tokens) {
  static const bool avx2 = isa_supported(CpuIsa::kAvx2);
  return avx2 && n_tokens >= kTiledMinTokens && tiled_kquant_type(weight);
}

TiledAccumulate tiled_accumulate() {
  static const TiledAccumulate how =
      best_isa() == CpuIsa::kAvx512 ? TiledAccumulate::kMultiplyThenAdd : TiledAccumulate::kFused;
  return how;
}

size_t tiled_activation_bytes(int64_t n_tokens, int64_t n_cols) {
  const int64_t groups = (n_tokens + kGroup - 1) / kGroup;
  return size_t(groups * (n_cols / kBlock) * kSegment);
}

}  // namespace sluice::cpu
