// Internal to backend/cuda: what the attention kernels share. cuda_attention.cu validates the
// call, chooses the kernel and the split of the KV range, and merges split partials;
// cuda_attention_decode.cu holds the bandwidth-bound F16 decode kernel, cuda_attention_prefill.cu
// the tensor-core F16 prefill kernel, cuda_attention_cpu_order.cu the CPU-ordered F16 kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace sluice::cuda {

struct AttentionParams {
  const float* q;  // [n_tokens, n_head, dk]
  float* out;      // [n_tokens, n_head, dv]
  const void* k;   // [capacity, n_head_kv, dk]
  const void* v;   // [capacity, n_head_kv, dv]
  const float* sinks;
  int64_t n_tokens, n_head, n_head_kv, group, dk, dv, capacity, pos0, window;
  float scale, softcap;
  int rows_per_block;
  int n_splits;
  int64_t split_len;    // cells per split, a multiple of the kernel's tile
  float* partial_acc;   // [n_tokens * n_head, n_splits, dv] when n_splits > 1
  float* partial_stat;  // [n_tokens * n_head, n_splits, 2]: running max, sum
  // Not nullptr: pos0 is read from here (a recorded step's parameter table; decode-sized calls
  // only, whose split is planned for the span's bucket, so that splits past the real end stay
  // empty: they write (max -inf, sum 0), which the combine weighs 0).
  const int64_t* pos0_slot;
};

// The first token's position, as the kernels must read it.
__device__ __forceinline__ int64_t first_position(const AttentionParams& p) {
  return p.pos0_slot != nullptr ? *p.pos0_slot : p.pos0;
}

// The first position a query at `pos` sees: 0, or the start of its sliding window.
__device__ __forceinline__ int64_t first_visible(const AttentionParams& p, int64_t pos) {
  return p.window > 0 && pos - p.window + 1 > 0 ? pos - p.window + 1 : int64_t(0);
}

// The ring slot of position base + j, from base_cell = base % capacity and j < capacity: one
// wrap instead of a 64-bit modulo per cell (a software routine of ~70 instructions on the GPU).
__device__ __forceinline__ int64_t ring_cell(int64_t base_cell, int64_t j, int64_t capacity) {
  const int64_t cell = base_cell + j;
  return cell < capacity ? cell : cell - capacity;
}

// Cells per tile of the decode kernel: 8 KB of K and of V (split_len is a multiple of it).
__host__ __device__ constexpr int decode_tile_cells(int64_t head_dim) {
  return int(4096 / head_dim);
}
// (token, query head) rows per decode block. 4, not 8, even for GQA groups of 8: 8 rows need
// 168 registers (spilling) and so give 3 blocks per multiprocessor instead of 4, and reading a
// KV chunk for two blocks of 4 rows (adjacent in the grid: the second read probably hits L2) was
// faster on the H200 (gpt-oss-like 64/8 × 64 over 32k cells: 108 µs vs 143 µs).
constexpr int kDecodeRows = 4;
// ... and 2 when the cells are too few to split into the blocks the GPU wants (every split a
// single tile): twice the blocks, each warp half the rows' work (a shorter chain of dependent
// instructions, which is what a short span's attention waits for), the tile's second read an L2
// hit. A row's arithmetic does not depend on the rows beside it: the same bits. H200, tg128:
// synthetic 8B +2.3%, Qwen3-30B-A3B +2–4% (docs/BENCHMARKS.md, session 20; 1 row a block
// measured the same as 2).
constexpr int kDecodeRowsShortSpan = 2;
constexpr int64_t kDecodeMaxTokens = 8;  // more tokens: the prefill kernel (reads K/V once)

// The F16 decode kernel (cuda_attention_decode.cu) takes the call when this is true: at most
// kDecodeMaxTokens tokens, head_dim_k = head_dim_v in {32, 64, 128, 256}, 16-byte aligned q/K/V
// (the caller checks that the cells are F16).
bool decode_kernel_fits(const AttentionParams& p);

// Grid: (ceil(n_tokens * group / rows_per_block), n_head_kv, n_splits).
void launch_decode_attention(const AttentionParams& p, dim3 grid, cudaStream_t stream);

// The F16 prefill kernel (cuda_attention_prefill.cu, tensor cores) takes the call when this is
// true: more than kDecodeMaxTokens tokens, head_dim_k = head_dim_v in {64, 128, 256}, 16-byte
// aligned q/out/K/V and its shared memory within the device's limit (the caller checks that the
// cells are F16).
constexpr int kPrefillRows = 64;   // (token, query head) rows per prefill block
constexpr int kPrefillCells = 64;  // cells per prefill tile (split_len is a multiple of it)
size_t prefill_shared_bytes(int64_t head_dim);
bool prefill_kernel_fits(const AttentionParams& p, size_t max_shared_bytes);

// Grid: (ceil(n_tokens * group / kPrefillRows), n_head_kv, n_splits).
void launch_prefill_attention(const AttentionParams& p, dim3 grid, cudaStream_t stream);

// F16 cells in the CPU backend's order (cuda_attention_cpu_order.cu), for CPU rounding: chunks
// of kCpuTiledMinTokens tokens or more with head_dim_v a multiple of 8 take the CPU's tiled
// path (cpu_order_tiled), the others its half-accumulator path. One block per (token, head);
// no split, no partials.
constexpr int64_t kCpuTiledMinTokens = 64;  // cpu_attention.cpp kTiledMinRows
bool cpu_order_tiled(const AttentionParams& p);
void launch_cpu_order_attention(const AttentionParams& p, cudaStream_t stream);

}  // namespace sluice::cuda
