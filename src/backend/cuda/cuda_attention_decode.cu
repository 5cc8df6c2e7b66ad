// Decode attention over an F16 KV cache, written to run at memory bandwidth (split-K
// flash-decoding). A block of 256 threads owns one KV head, 4 (token, query head) rows of its GQA
// group (2 on short spans: cuda_attention_params.h) and one chunk of the cells (the split);
// larger groups take several blocks per chunk, adjacent in the
// grid so that the chunk probably comes from DRAM once. Per tile (8 KB of K and of V, double
// buffered in shared memory by cp.async so that tile t+1 loads while tile t is computed):
//   1. scores: a cell's K row is read by DK/8 lanes with one 16-byte shared load each; each lane
//      multiplies its 8 dims with every row's query (registers) and the lanes of the cell sum
//      with xor shuffles. Masked cells (causal, window, past the chunk) score -inf.
//   2. softmax: one warp per row: tile max, rescale of the running (max, sum), weights.
//   3. P·V: a cell's V row is read by DV/8 lanes, 16 bytes each; each lane keeps an 8-dim float
//      accumulator per row, rescaled once per tile.
// At the end the cell groups' accumulators are summed through shared memory; the block writes
// its output (one split) or its partial (max, sum, accumulator) for the combine kernel in
// cuda_attention.cu. Float32 throughout, as the generic kernel.
#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/cuda_attention_params.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_math.cuh"

namespace sluice::cuda {
namespace {

__device__ __forceinline__ void halves_to_floats(const uint4& raw, float (&out)[8]) {
  const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(h[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

// The ring cell of a position: the 64-bit modulo (a software routine of ~70 instructions, which
// the compiler hoists out of the branches that need it) only once the ring has wrapped.
__device__ __forceinline__ int64_t cell_of(int64_t position, int64_t capacity) {
  return position < capacity ? position : position % capacity;
}

// 16 bytes global -> shared without passing through registers (Ampere+ cp.async; .cg: L2 only,
// the cells are read once).
__device__ __forceinline__ void copy_async_16(void* shared_dst, const void* global_src) {
  const unsigned dst = unsigned(__cvta_generic_to_shared(shared_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(global_src));
}
__device__ __forceinline__ void copy_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
__device__ __forceinline__ void copy_async_wait_all_but_one() {
  asm volatile("cp.async.wait_group 1;\n" ::);
}

// Registers bound: 4 blocks per multiprocessor with 4 rows of 128 threads (16 KB of loads in
// flight per block); 2 with 256 threads.
constexpr int decode_min_blocks(int threads, int rows) {
  if (threads > 128) return 2;
  return rows <= 4 ? 4 : 3;
}

template <int DK, int DV, int R, int kThreads>
__global__ void __launch_bounds__(kThreads, decode_min_blocks(kThreads, R))
    decode_kernel(AttentionParams p) {
  static_assert(DK == DV, "one tile size for K and V");
  constexpr int kT = 4096 / DK;    // cells per tile: 8 KB of K and 8 KB of V
  constexpr int kLanesK = DK / 8;  // lanes per K row (16-byte pieces)
  constexpr int kGroupsK = kThreads / kLanesK;
  constexpr int kLanesV = DV / 8;
  constexpr int kGroupsV = kThreads / kLanesV;
  constexpr int kCellsK = kT / kGroupsK;
  constexpr int kCellsV = kT / kGroupsV;
  constexpr int kPerLane = (kT + 31) / 32;  // scores per lane in the softmax step
  static_assert(kT == decode_tile_cells(DK), "the host splits in whole tiles");
  __shared__ __align__(16) __half k_stage[2][kT * DK];  // double buffer: tile t+1 loads while
  __shared__ __align__(16) __half v_stage[2][kT * DV];  // tile t is computed
  __shared__ float weights[R][kT];                      // scores, then softmax weights
  __shared__ float row_max[R], row_sum[R], row_rescale[R];
  __shared__ float reduce[kGroupsV * DV];

  wait_for_prerequisite();  // launched as a dependent (cuda_launch.cuh)
  allow_dependent_launch();
  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int warp = tid / 32;
  const int64_t kv_head = blockIdx.y;
  const int64_t rows_total = p.n_tokens * p.group;
  const int64_t row0 = int64_t(blockIdx.x) * R;
  const int n_rows = int(min(int64_t(R), rows_total - row0));
  const auto* keys = static_cast<const __half*>(p.k);
  const auto* values = static_cast<const __half*>(p.v);

  // Rows: the query piece of this lane (its 8 dims of the K row) in registers; the positions
  // each row sees and its output row in shared memory (registers are what limits blocks per
  // multiprocessor). Row indices fit 32 bits: 64-bit divisions (a software routine of ~70
  // instructions each, in every row's index and every cell's ring slot) made a decode call on a
  // few cells cost 11 µs of instructions.
  __shared__ int64_t row_pos[R], row_first[R], row_out[R];
  __shared__ int row_head[R];  // the query head (sinks: no 64-bit modulo of row_out)
  const int group = int(p.group);
  const int k_group = tid / kLanesK, k_lane = tid % kLanesK;
  float q[R][8];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int row = int(row0) + r;
    const int t = row / group;
    if (r < n_rows) {
      const int64_t head = kv_head * group + (row - t * group);
      const float4* src =
          reinterpret_cast<const float4*>(p.q + (t * p.n_head + head) * DK + k_lane * 8);
      const float4 a = src[0], b = src[1];
      q[r][0] = a.x, q[r][1] = a.y, q[r][2] = a.z, q[r][3] = a.w;
      q[r][4] = b.x, q[r][5] = b.y, q[r][6] = b.z, q[r][7] = b.w;
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) q[r][i] = 0.0f;
    }
  }
  const int64_t pos0 = first_position(p);
  if (tid < R) {
    const int row = int(row0) + tid;
    const int t = row / group;
    row_max[tid] = -INFINITY;
    row_sum[tid] = 0.0f;
    row_pos[tid] = pos0 + t;
    row_first[tid] = first_visible(p, row_pos[tid]);
    row_head[tid] = int(kv_head) * group + (row - t * group);
    row_out[tid] = int64_t(t) * p.n_head + row_head[tid];
  }

  // This block's cells: what its rows see, this split's share of it.
  const int64_t block_lo = first_visible(p, pos0 + int(row0) / group);
  const int64_t block_hi = pos0 + (int(row0) + n_rows - 1) / group;
  const int64_t lo = block_lo + int64_t(blockIdx.z) * p.split_len;
  const int64_t hi = min(block_hi, lo + p.split_len - 1);
  const int n_tiles = hi >= lo ? int((hi - lo + kT) / kT) : 0;

  // Tile loads: K and V rows as 16-byte pieces, consecutive threads on consecutive pieces.
  // Cells past `hi` are not loaded: they score -inf and their weight 0 skips their V row.
  const auto issue_tile = [&](int t) {
    const int64_t tile = lo + int64_t(t) * kT;
    const int n_in = hi - tile + 1 < kT ? int(hi - tile + 1) : kT;
    const int64_t tile_cell = cell_of(tile, p.capacity);  // cell j: ring_cell (j < n_in)
    __half* k_dst = k_stage[t & 1];
    __half* v_dst = v_stage[t & 1];
#pragma unroll
    for (int i = 0; i < kT * DK / 8 / kThreads; ++i) {
      const int piece = tid + i * kThreads;
      const int j = piece / kLanesK, d = piece % kLanesK * 8;
      if (j < n_in) {
        const int64_t cell = ring_cell(tile_cell, j, p.capacity);
        copy_async_16(k_dst + j * DK + d, keys + (cell * p.n_head_kv + kv_head) * DK + d);
      }
    }
#pragma unroll
    for (int i = 0; i < kT * DV / 8 / kThreads; ++i) {
      const int piece = tid + i * kThreads;
      const int j = piece / kLanesV, d = piece % kLanesV * 8;
      if (j < n_in) {
        const int64_t cell = ring_cell(tile_cell, j, p.capacity);
        copy_async_16(v_dst + j * DV + d, values + (cell * p.n_head_kv + kv_head) * DV + d);
      }
    }
  };

  const int v_group = tid / kLanesV, v_lane = tid % kLanesV;
  float acc[R][8];
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[r][i] = 0.0f;
  }

  if (n_tiles > 0) issue_tile(0);
  copy_async_commit();
  for (int t = 0; t < n_tiles; ++t) {
    if (t + 1 < n_tiles) issue_tile(t + 1);
    copy_async_commit();
    copy_async_wait_all_but_one();  // this thread's pieces of tile t have landed
    __syncthreads();                // everyone's have
    const int64_t tile = lo + int64_t(t) * kT;
    const int n_in = hi - tile + 1 < kT ? int(hi - tile + 1) : kT;

    // 1. Scores.
#pragma unroll
    for (int c = 0; c < kCellsK; ++c) {
      const int j = k_group + c * kGroupsK;
      const int64_t position = tile + j;
      float k[8];
      halves_to_floats(*reinterpret_cast<const uint4*>(k_stage[t & 1] + j * DK + k_lane * 8), k);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (r >= n_rows) break;  // uniform over the block
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) dot = fmaf(q[r][i], k[i], dot);
#pragma unroll
        for (int offset = kLanesK / 2; offset > 0; offset >>= 1) {
          dot += __shfl_xor_sync(0xffffffffu, dot, offset);
        }
        if (k_lane == 0) {
          float score = -INFINITY;
          if (j < n_in && position >= row_first[r] && position <= row_pos[r]) {
            score = dot * p.scale;
            if (p.softcap > 0.0f) score = p.softcap * tanhf(score / p.softcap);
          }
          weights[r][j] = score;
        }
      }
    }
    __syncthreads();

    // 2. Softmax: one warp per row.
    for (int r = warp; r < n_rows; r += kThreads / 32) {
      float s[kPerLane];
      float tile_max = -INFINITY;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int j = lane + 32 * i;
        s[i] = j < kT ? weights[r][j] : -INFINITY;
        tile_max = fmaxf(tile_max, s[i]);
      }
      tile_max = warp_max(tile_max);
      const float old_max = row_max[r];
      const float new_max = fmaxf(old_max, tile_max);
      const float rescale = tile_max == -INFINITY ? 1.0f : expf(old_max - new_max);
      float tile_sum = 0.0f;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int j = lane + 32 * i;
        const float w = s[i] == -INFINITY ? 0.0f : expf(s[i] - new_max);
        tile_sum += w;
        if (j < kT) weights[r][j] = w;
      }
      tile_sum = warp_sum(tile_sum);
      if (lane == 0) {
        row_rescale[r] = rescale;
        row_sum[r] = row_sum[r] * rescale + tile_sum;
        row_max[r] = new_max;
      }
    }
    __syncthreads();

    // 3. P·V.
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float rescale = row_rescale[r < n_rows ? r : 0];
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[r][i] *= rescale;
    }
#pragma unroll
    for (int c = 0; c < kCellsV; ++c) {
      const int j = v_group + c * kGroupsV;
      float v[8];
      halves_to_floats(*reinterpret_cast<const uint4*>(v_stage[t & 1] + j * DV + v_lane * 8), v);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (r >= n_rows) break;
        const float w = weights[r][j];
        if (w == 0.0f) continue;  // masked or not loaded: adds nothing
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[r][i] = fmaf(w, v[i], acc[r][i]);
      }
    }
    __syncthreads();  // the stage is refilled and the weights rewritten by the next tiles
  }

  // Per row: sum the cell groups' accumulators, then the output or this split's partial.
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r >= n_rows) break;
#pragma unroll
    for (int i = 0; i < 8; ++i) reduce[v_group * DV + v_lane * 8 + i] = acc[r][i];
    __syncthreads();
    for (int d = tid; d < DV; d += kThreads) {
      float total = 0.0f;
#pragma unroll
      for (int g = 0; g < kGroupsV; ++g) total += reduce[g * DV + d];
      const int64_t out_row = row_out[r];
      if (p.n_splits > 1) {
        const int64_t part = out_row * p.n_splits + blockIdx.z;
        p.partial_acc[part * DV + d] = total;
        if (d == 0) {
          p.partial_stat[2 * part] = row_max[r];
          p.partial_stat[2 * part + 1] = row_sum[r];
        }
        continue;
      }
      float m = row_max[r];
      float l = row_sum[r];
      float factor = 1.0f;
      if (p.sinks != nullptr) {
        const float sink = p.sinks[row_head[r]];
        const float new_max = fmaxf(m, sink);
        factor = expf(m - new_max);
        l = l * factor + expf(sink - new_max);
      }
      p.out[out_row * DV + d] = l == 0.0f ? 0.0f : total * (factor / l);
    }
    __syncthreads();  // `reduce` is rewritten for the next row
  }
}

// 256 threads a block: each warp takes half a tile's cells, so a one-tile split's chain of
// instructions is shorter than with 128 (README.md, "Decode"; docs/BENCHMARKS.md, session 20).
constexpr int kDecodeThreads = 256;

template <int DK, int DV>
void launch_rows(const AttentionParams& p, dim3 grid, cudaStream_t stream) {
  const auto kernel = p.rows_per_block == kDecodeRowsShortSpan
                          ? decode_kernel<DK, DV, kDecodeRowsShortSpan, kDecodeThreads>
                          : decode_kernel<DK, DV, kDecodeRows, kDecodeThreads>;
  check(launch_chained(kernel, grid, dim3(kDecodeThreads), 0, stream, p),
        "attention decode kernel");
}

bool supported_dim(int64_t d) {
  return d == 32 || d == 64 || d == 128 || d == 256;
}

}  // namespace

bool decode_kernel_fits(const AttentionParams& p) {
  const auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  return p.n_tokens <= kDecodeMaxTokens && supported_dim(p.dk) && p.dk == p.dv && aligned(p.k) &&
         aligned(p.v) && aligned(p.q);
}

void launch_decode_attention(const AttentionParams& p, dim3 grid, cudaStream_t stream) {
  switch (p.dk) {
    case 32:
      return launch_rows<32, 32>(p, grid, stream);
    case 64:
      return launch_rows<64, 64>(p, grid, stream);
    case 128:
      return launch_rows<128, 128>(p, grid, stream);
    default:
      return launch_rows<256, 256>(p, grid, stream);
  }
}

}  // namespace sluice::cuda
