// The AVX2 tiled flash-attention path for prefill chunks of 64+ tokens with an F16 cache (see
// attention_tiled_avx2.cpp and run_tiled in cpu_attention.cpp, which it equals bit for bit).
// Internal to backend/cpu.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace sluice::cpu {

inline constexpr int64_t kTiledBlockRows = 64;  // query rows of one head per work item
inline constexpr int64_t kTiledMaxHeadDim = 256;

// Per-thread scratch of one work item.
struct TiledScratch {
  float keys[kTiledMaxHeadDim * 64];              // [dk, 64]
  float values[64 * kTiledMaxHeadDim];            // [64, dv]
  float acc[kTiledBlockRows * kTiledMaxHeadDim];  // [rows, dv]
  float max_score[kTiledBlockRows];
  float sum[kTiledBlockRows];
};

// Rows t_begin..t_end-1 (at most kTiledBlockRows) of query head h. Requires AVX2, an F16 cache,
// head dims <= kTiledMaxHeadDim and dv % 8 == 0.
void attention_tiled_rows_avx2(const AttentionCall& call, int64_t h, int64_t t_begin, int64_t t_end,
                               TiledScratch& scratch);

}  // namespace sluice::cpu
