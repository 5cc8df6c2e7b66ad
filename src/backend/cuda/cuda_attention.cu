// KV writes and attention on the device. F16 decode (few tokens, common head dims) goes to the
// bandwidth-bound split-K kernel in cuda_attention_decode.cu, F16 prefill with head dims
// 64/128/256 to the tensor-core kernel in cuda_attention_prefill.cu. Everything else (F32 cells,
// MLA 192/128, other dims) runs the generic kernel here: a block takes up to 16 (token, query head)
// rows that share one KV head (GQA), walks the positions its rows see in tiles of 32 cells staged
// in shared memory as float, and keeps an online softmax per row (running maximum, rescaled sum,
// float accumulator) — flash attention. When either gives too few blocks to fill the GPU the KV
// range is split over blocks (split-K flash-decoding): each writes its partial (max, sum,
// accumulator) and combine_kernel merges them, adds the attention sink and divides.
//
// Decode-sized calls plan that split for the visible span rounded up to kAttentionSpanBucket
// cells and may read their position from the device (cuda_ops.h): a recorded step's graph then
// serves every position of a bucket; the splits past the real end find no cell and are weighed 0.
//
// The CPU reference rounds differently (F16 decode: query and accumulator in half; prefill:
// polynomial exp per 64-cell tile), so results agree within a tolerance, not bit for bit; the
// float32 accumulation here is at least as accurate (tests/backend/cuda_backend_test.cpp).
// With CPU rounding asked for, F16 cells go to cuda_attention_cpu_order.cu instead.
#include <cuda_fp16.h>

#include <algorithm>

#include "backend/cuda/cuda_attention_params.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_math.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_step_graph.h"

namespace sluice::cuda {
namespace {

constexpr int kTile = 32;        // cells per tile: one per lane when scoring
constexpr int kRowsPerWarp = 2;  // (token, head) rows each warp carries through the tiles
constexpr int kMaxRowsPerBlock = 16;
constexpr int64_t kMaxHeadDim = 1024;  // as the CPU backend
constexpr int kCombineThreads = 256;
constexpr int kMaxSplits = 1024;

__device__ __forceinline__ float load_float(const __half* p, int64_t i) {
  return __half2float(p[i]);
}
__device__ __forceinline__ float load_float(const float* p, int64_t i) {
  return p[i];
}

// Grid: (row blocks, KV heads, splits). Row r of KV head h is token r / group, query head
// h * group + r % group. VPL: accumulator floats per lane (dv <= 32 * VPL).
template <class T, int VPL>
__global__ void attention_kernel(AttentionParams p) {
  extern __shared__ float shared[];
  const int R = p.rows_per_block;
  const int64_t dk = p.dk;
  const int64_t dv = p.dv;
  float* q_tile = shared;                     // [R, dk]
  float* k_tile = q_tile + R * dk;            // [kTile, dk + 1] (padded: lanes read different rows)
  float* v_tile = k_tile + kTile * (dk + 1);  // [kTile, dv]
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int n_warps = blockDim.x / 32;
  const int64_t kv_head = blockIdx.y;
  const int64_t rows_total = p.n_tokens * p.group;
  const int64_t row0 = int64_t(blockIdx.x) * R;
  const auto* keys = static_cast<const T*>(p.k);
  const auto* values = static_cast<const T*>(p.v);

  for (int r = warp; r < R; r += n_warps) {
    const int64_t row = row0 + r;
    const int64_t t = row / p.group;
    const int64_t head = kv_head * p.group + row % p.group;
    for (int64_t d = lane; d < dk; d += 32) {
      q_tile[r * dk + d] = row < rows_total ? p.q[(t * p.n_head + head) * dk + d] : 0.0f;
    }
  }

  // The cells this block's rows see, and this split's share of them (none past the real end
  // when the split was planned for a longer span: the tile loop does not run).
  const int64_t pos0 = first_position(p);
  const int64_t t_first = row0 / p.group;
  const int64_t t_last = min(row0 + R - 1, rows_total - 1) / p.group;
  const int64_t block_lo = first_visible(p, pos0 + t_first);
  const int64_t block_hi = pos0 + t_last;
  const int64_t lo = block_lo + int64_t(blockIdx.z) * p.split_len;
  const int64_t hi = min(block_hi, lo + p.split_len - 1);

  // This warp's rows.
  bool valid[kRowsPerWarp];
  int64_t row_pos[kRowsPerWarp], row_first[kRowsPerWarp], out_row[kRowsPerWarp];
  float max_score[kRowsPerWarp], sum[kRowsPerWarp], acc[kRowsPerWarp][VPL];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int64_t row = row0 + warp * kRowsPerWarp + i;
    valid[i] = warp * kRowsPerWarp + i < R && row < rows_total;
    const int64_t t = row / p.group;
    row_pos[i] = pos0 + t;
    row_first[i] = first_visible(p, row_pos[i]);
    out_row[i] = t * p.n_head + kv_head * p.group + row % p.group;
    max_score[i] = -INFINITY;
    sum[i] = 0.0f;
#pragma unroll
    for (int j = 0; j < VPL; ++j) acc[i][j] = 0.0f;
  }

  for (int64_t tile = lo; tile <= hi; tile += kTile) {
    const int n_in = hi - tile + 1 < kTile ? int(hi - tile + 1) : kTile;
    __syncthreads();  // the previous tile (and, first time, the queries) fully read / written
    const int64_t tile_cell = tile % p.capacity;
    for (int j = warp; j < kTile; j += n_warps) {
      // Cells past n_in (read as 0) may wrap further: j < kTile, not n_in; capacity >= 1.
      const int64_t cell = j < n_in ? ring_cell(tile_cell, j, p.capacity) : tile_cell;
      const T* k_row = keys + (cell * p.n_head_kv + kv_head) * dk;
      const T* v_row = values + (cell * p.n_head_kv + kv_head) * dv;
      for (int64_t d = lane; d < dk; d += 32) {
        k_tile[j * (dk + 1) + d] = j < n_in ? load_float(k_row, d) : 0.0f;
      }
      for (int64_t d = lane; d < dv; d += 32)
        v_tile[j * dv + d] = j < n_in ? load_float(v_row, d) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      if (!valid[i]) continue;  // uniform over the warp
      const int r = warp * kRowsPerWarp + i;
      const int64_t position = tile + lane;
      float score = -INFINITY;
      if (lane < n_in && position >= row_first[i] && position <= row_pos[i]) {
        float dot = 0.0f;
        const float* q_row = q_tile + r * dk;
        const float* k_row = k_tile + lane * (dk + 1);
        for (int64_t d = 0; d < dk; ++d) dot = fmaf(q_row[d], k_row[d], dot);
        score = dot * p.scale;
        if (p.softcap > 0.0f) score = p.softcap * tanhf(score / p.softcap);
      }
      const float tile_max = warp_max(score);
      if (tile_max == -INFINITY) continue;  // no visible cell in this tile for this row
      const float new_max = fmaxf(max_score[i], tile_max);
      const float rescale = expf(max_score[i] - new_max);  // 0 while nothing was seen
      const float weight = score == -INFINITY ? 0.0f : expf(score - new_max);
      sum[i] = sum[i] * rescale + warp_sum(weight);
      max_score[i] = new_max;
#pragma unroll
      for (int j = 0; j < VPL; ++j) acc[i][j] *= rescale;
      for (int c = 0; c < n_in; ++c) {
        const float w = __shfl_sync(0xffffffffu, weight, c);
        if (w == 0.0f) continue;  // masked cells add nothing (and may hold stale data)
        const float* v_row = v_tile + c * dv;
#pragma unroll
        for (int j = 0; j < VPL; ++j) {
          const int64_t d = lane + 32 * j;
          if (d < dv) acc[i][j] = fmaf(w, v_row[d], acc[i][j]);
        }
      }
    }
  }

#pragma unroll

  for (int i = 0; i < kRowsPerWarp; ++i) {
    if (!valid[i]) continue;
    if (p.n_splits > 1) {
      const int64_t part = out_row[i] * p.n_splits + blockIdx.z;
#pragma unroll
      for (int j = 0; j < VPL; ++j) {
        const int64_t d = lane + 32 * j;
        if (d < dv) p.partial_acc[part * dv + d] = acc[i][j];
      }
      if (lane == 0) {
        p.partial_stat[2 * part] = max_score[i];
        p.partial_stat[2 * part + 1] = sum[i];
      }
      continue;
    }
    float m = max_score[i];
    float l = sum[i];
    float factor = 1.0f;
    if (p.sinks != nullptr) {
      const float sink = p.sinks[out_row[i] % p.n_head];
      const float new_max = fmaxf(m, sink);
      factor = expf(m - new_max);
      l = l * factor + expf(sink - new_max);
      m = new_max;
    }
    const float inv = l == 0.0f ? 0.0f : factor / l;
#pragma unroll
    for (int j = 0; j < VPL; ++j) {
      const int64_t d = lane + 32 * j;
      if (d < dv) p.out[out_row[i] * dv + d] = acc[i][j] * inv;
    }
  }
}

// Merges the splits' partial softmaxes and the sink. Block (row, 32-dim slice): warp 0 finds the
// common max and each split's weight; then each warp sums its share of the splits (every eighth)
// for the slice's 32 dims (128-byte loads), and the warps' sums are added in shared memory.
// Split-K decode has a hundred or more splits: spread over warps, their loads overlap.
constexpr int kCombineWarps = kCombineThreads / 32;
__global__ void combine_kernel(AttentionParams p) {
  __shared__ float weights[kMaxSplits];
  __shared__ float inv_sum;
  __shared__ float warp_totals[kCombineWarps][32];
  wait_for_prerequisite();  // launched as a dependent (cuda_launch.cuh)
  allow_dependent_launch();
  const int64_t row = blockIdx.x;  // token * n_head + head
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float* stat = p.partial_stat + row * p.n_splits * 2;
  if (warp == 0) {
    float m = -INFINITY;
    for (int s = lane; s < p.n_splits; s += 32) m = fmaxf(m, stat[2 * s]);
    const float sink = p.sinks != nullptr ? p.sinks[row % p.n_head] : -INFINITY;
    m = fmaxf(warp_max(m), sink);
    float l = 0.0f;
    for (int s = lane; s < p.n_splits; s += 32) {
      weights[s] = stat[2 * s] == -INFINITY ? 0.0f : expf(stat[2 * s] - m);
      l += stat[2 * s + 1] * weights[s];
    }
    l = warp_sum(l);
    if (p.sinks != nullptr) l += expf(sink - m);
    if (lane == 0) inv_sum = l == 0.0f ? 0.0f : 1.0f / l;
  }
  __syncthreads();
  const int64_t d = int64_t(blockIdx.y) * 32 + lane;
  const float* acc = p.partial_acc + row * p.n_splits * p.dv;
  float total = 0.0f;
  if (d < p.dv) {
#pragma unroll 4
    for (int s = warp; s < p.n_splits; s += kCombineWarps) {
      // An empty split wrote zeros and has weight 0: it adds nothing.
      total = fmaf(acc[s * p.dv + d], weights[s], total);
    }
  }
  warp_totals[warp][lane] = total;
  __syncthreads();
  if (warp == 0 && d < p.dv) {
    float sum = 0.0f;
    for (int w = 0; w < kCombineWarps; ++w) sum += warp_totals[w][lane];
    p.out[row * p.dv + d] = sum * inv_sum;
  }
}

__global__ void store_rows_half(const float* src, __half* cells, int64_t row, int64_t n_tokens,
                                int64_t pos0, const int64_t* pos0_slot, int64_t capacity) {
  if (pos0_slot != nullptr) pos0 = *pos0_slot;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n_tokens * row;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / row;
    cells[((pos0 + t) % capacity) * row + i % row] = __float2half_rn(src[i]);
  }
}

__global__ void store_rows_float(const float* src, float* cells, int64_t row, int64_t n_tokens,
                                 int64_t pos0, const int64_t* pos0_slot, int64_t capacity) {
  if (pos0_slot != nullptr) pos0 = *pos0_slot;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n_tokens * row;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / row;
    cells[((pos0 + t) % capacity) * row + i % row] = src[i];
  }
}

// Cells visible to the call's tokens: from the first token's window start to the last token.
int64_t visible_span(int64_t pos0, int64_t n_tokens, int64_t window) {
  const int64_t first_cell = window > 0 ? std::max<int64_t>(0, pos0 - window + 1) : 0;
  return pos0 + n_tokens - first_cell;
}

// The span a split plan must serve: the call's own for prefill-sized calls; for decode-sized
// ones the longest of its bucket (cuda_ops.h), so that the plan — the grid a recorded graph
// holds — is the same for every span of the bucket; for shorter spans the last splits find fewer
// cells, or none (an empty split weighs 0 in the combine). Planning for the longest also gives a
// short context its splits: a single block walking tile after tile took 13 µs per layer of
// Gemma 3 270M on a hundred cells (one KV head), latency rather than bytes.
int64_t planned_span(int64_t pos0, int64_t n_tokens, int64_t window) {
  const int64_t span = visible_span(pos0, n_tokens, window);
  if (!attention_position_on_device(n_tokens)) return span;
  return (span + kAttentionSpanBucket - 1) / kAttentionSpanBucket * kAttentionSpanBucket;
}

// n_splits and split_len (a multiple of `tile`) for `span`: `wanted` splits, but at least
// `min_tiles` tiles each.
void plan_splits(AttentionParams& p, int64_t span, int64_t wanted, int64_t tile,
                 int64_t min_tiles) {
  int64_t n_splits =
      std::clamp<int64_t>(std::min(wanted, span / (min_tiles * tile)), 1, kMaxSplits);
  int64_t split_len = (span + n_splits - 1) / n_splits;
  split_len = (split_len + tile - 1) / tile * tile;
  n_splits = (span + split_len - 1) / split_len;
  p.n_splits = int(n_splits);
  p.split_len = split_len;
}

size_t shared_bytes(int rows, int64_t dk, int64_t dv) {
  return sizeof(float) * size_t(rows * dk + kTile * (dk + 1) + kTile * dv);
}

template <class T, int VPL>
void launch_kernel(const AttentionParams& params, dim3 grid, size_t shared, cudaStream_t stream) {
  check(cudaFuncSetAttribute(attention_kernel<T, VPL>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             int(shared)),
        "attention shared memory");
  const int threads = 32 * ((params.rows_per_block + kRowsPerWarp - 1) / kRowsPerWarp);
  attention_kernel<T, VPL><<<grid, threads, shared, stream>>>(params);
}

template <class T>
void launch_typed(const AttentionParams& params, dim3 grid, size_t shared, cudaStream_t stream) {
  if (params.dv <= 128) return launch_kernel<T, 4>(params, grid, shared, stream);
  if (params.dv <= 256) return launch_kernel<T, 8>(params, grid, shared, stream);
  if (params.dv <= 512) return launch_kernel<T, 16>(params, grid, shared, stream);
  return launch_kernel<T, 32>(params, grid, shared, stream);
}

// Split partials live in `scratch`: [rows, n_splits, dv] accumulators, then (max, sum) pairs.
// Growing frees the old allocation, which kernels captured earlier in a recorded step may use:
// refused while capturing.
void reserve_partials(AttentionParams& p, DeviceBuffer& scratch, cudaStream_t stream) {
  const size_t rows_out = size_t(p.n_tokens * p.n_head * p.n_splits);
  const size_t acc_floats = rows_out * size_t(p.dv);
  const size_t bytes = sizeof(float) * (acc_floats + 2 * rows_out);
  if (scratch.size() < bytes) refuse_growth_while_capturing(stream, "the attention split scratch");
  scratch.reserve(bytes);
  p.partial_acc = scratch.as<float>();
  p.partial_stat = p.partial_acc + acc_floats;
}

void launch_combine(const AttentionParams& p, cudaStream_t stream) {
  const dim3 grid(unsigned(p.n_tokens * p.n_head), unsigned((p.dv + 31) / 32));
  check(launch_chained(combine_kernel, grid, dim3(kCombineThreads), 0, stream, p),
        "attention combine kernel");
}

// Decode over F16 cells (cuda_attention_decode.cu): about eight blocks per multiprocessor, so
// that enough 16-byte loads are in flight to run at memory bandwidth, and at least one tile per
// split (a block's partials, ~2 KB, are still an eighth of a tile's 16 KB of cells). Two tiles
// per split, the earlier rule, left short spans half the blocks, each walking its tiles in turn:
// one tile each decoded 4.6-5.8% faster (8B and Qwen3-30B-A3B tg128 on the H200; see
// docs/BENCHMARKS.md). A span too short for the wanted splits takes blocks of fewer rows.
// The split is planned for the span's bucket (planned_span), whatever the position.
void launch_decode(AttentionParams p, const AttentionDevice& device, DeviceBuffer& scratch,
                   cudaStream_t stream) {
  const int64_t rows_total = p.n_tokens * p.group;
  const int64_t tile = decode_tile_cells(p.dk);
  int64_t row_blocks = 0;
  for (const int rows : {kDecodeRows, kDecodeRowsShortSpan}) {  // cuda_attention_params.h
    p.rows_per_block = rows;
    row_blocks = (rows_total + rows - 1) / rows;
    const int64_t base_blocks = row_blocks * p.n_head_kv;
    const int64_t wanted = (8 * int64_t(device.multiprocessors) + base_blocks - 1) / base_blocks;
    plan_splits(p, planned_span(p.pos0, p.n_tokens, p.window), wanted, tile, 1);
    const bool short_span = p.n_splits < wanted && p.split_len == tile;
    if (!short_span || rows_total <= kDecodeRowsShortSpan) break;
  }
  if (p.n_splits > 1) reserve_partials(p, scratch, stream);
  launch_decode_attention(
      p, dim3(unsigned(row_blocks), unsigned(p.n_head_kv), unsigned(p.n_splits)), stream);
  check_launch("attention decode kernel");
  if (p.n_splits > 1) launch_combine(p, stream);
}

// Prefill over F16 cells on tensor cores (cuda_attention_prefill.cu): 64 rows per block; the
// cells are split over blocks (up to two blocks per multiprocessor, at least four tiles per
// split) only when the rows give fewer blocks than multiprocessors (a short chunk over a long
// cache). Not below two per multiprocessor as the generic kernel: the merge runs a block per
// (row, 32 dims), and for 512 Llama-like tokens (256 blocks, split in 2) it cost more than the
// split gained (133 µs per call against 40 µs for an unsplit call of the same FLOPs, H200).
void launch_prefill(AttentionParams p, const AttentionDevice& device, DeviceBuffer& scratch,
                    cudaStream_t stream) {
  const int64_t rows_total = p.n_tokens * p.group;
  p.rows_per_block = kPrefillRows;
  const int64_t row_blocks = (rows_total + kPrefillRows - 1) / kPrefillRows;
  if (row_blocks > int64_t(0x7fffffff)) {
    fail("attention: ", p.n_tokens, " tokens x ", p.n_head, " heads are too many");
  }
  const int64_t base_blocks = row_blocks * p.n_head_kv;
  int64_t wanted = 1;
  if (base_blocks < int64_t(device.multiprocessors)) {
    wanted = (2 * int64_t(device.multiprocessors) + base_blocks - 1) / base_blocks;
  }
  const int64_t span = visible_span(p.pos0, p.n_tokens, p.window);  // prefill: the exact span
  plan_splits(p, span, wanted, kPrefillCells, 4);
  if (p.n_splits > 1) reserve_partials(p, scratch, stream);
  launch_prefill_attention(
      p, dim3(unsigned(row_blocks), unsigned(p.n_head_kv), unsigned(p.n_splits)), stream);
  check_launch("attention prefill kernel");
  if (p.n_splits > 1) launch_combine(p, stream);
}

}  // namespace

void launch_kv_store(const KvLayerView& kv, const float* k, const float* v, int64_t n_tokens,
                     int64_t pos0, const int64_t* pos0_slot, cudaStream_t stream) {
  if (n_tokens <= 0) return;
  if (kv.capacity <= 0 || pos0 < 0) fail("kv_store: capacity ", kv.capacity, ", position ", pos0);
  const int64_t k_row = kv.n_head_kv * kv.head_dim_k;
  const int64_t v_row = kv.n_head_kv * kv.head_dim_v;
  constexpr int kThreads = 256;
  if (kv.type == KvElement::kF16) {
    store_rows_half<<<grid_for(n_tokens * k_row, kThreads), kThreads, 0, stream>>>(
        k, static_cast<__half*>(kv.k), k_row, n_tokens, pos0, pos0_slot, kv.capacity);
    store_rows_half<<<grid_for(n_tokens * v_row, kThreads), kThreads, 0, stream>>>(
        v, static_cast<__half*>(kv.v), v_row, n_tokens, pos0, pos0_slot, kv.capacity);
  } else {
    store_rows_float<<<grid_for(n_tokens * k_row, kThreads), kThreads, 0, stream>>>(
        k, static_cast<float*>(kv.k), k_row, n_tokens, pos0, pos0_slot, kv.capacity);
    store_rows_float<<<grid_for(n_tokens * v_row, kThreads), kThreads, 0, stream>>>(
        v, static_cast<float*>(kv.v), v_row, n_tokens, pos0, pos0_slot, kv.capacity);
  }
  check_launch("kv_store kernel");
}

bool attention_position_on_device(int64_t n_tokens) {
  return n_tokens <= kDecodeMaxTokens;
}

int64_t attention_planned_span(const AttentionCall& call) {
  return planned_span(call.pos0, call.n_tokens, call.window);
}

void launch_attention(const AttentionCall& call, const int64_t* pos0_slot,
                      const AttentionDevice& device, DeviceBuffer& scratch, cudaStream_t stream,
                      bool cpu_rounding) {
  const KvLayerView& kv = call.kv;
  if (kv.head_dim_k > kMaxHeadDim || kv.head_dim_v > kMaxHeadDim || kv.head_dim_k <= 0 ||
      kv.head_dim_v <= 0) {
    fail("attention: head dimension ", kv.head_dim_k, "/", kv.head_dim_v, " exceeds ", kMaxHeadDim);
  }
  if (kv.n_head_kv <= 0 || call.n_head % kv.n_head_kv != 0) {
    fail("attention: ", call.n_head, " query heads do not group over ", kv.n_head_kv, " KV heads");
  }
  if (kv.capacity <= 0 || call.pos0 < 0) {
    fail("attention: capacity ", kv.capacity, ", position ", call.pos0);
  }
  if (call.n_tokens <= 0) return;

  AttentionParams p{};
  p.q = call.q;
  p.out = call.out;
  p.k = kv.k;
  p.v = kv.v;
  p.sinks = call.sinks;
  p.n_tokens = call.n_tokens;
  p.n_head = call.n_head;
  p.n_head_kv = kv.n_head_kv;
  p.group = call.n_head / kv.n_head_kv;
  p.dk = kv.head_dim_k;
  p.dv = kv.head_dim_v;
  p.capacity = kv.capacity;
  p.pos0 = call.pos0;
  p.window = call.window;
  p.scale = call.scale;
  p.softcap = call.softcap;
  p.pos0_slot = attention_position_on_device(call.n_tokens) ? pos0_slot : nullptr;
  if (kv.n_head_kv > 65535) fail("attention: ", kv.n_head_kv, " KV heads are too many");
  if (kv.type == KvElement::kF16 && cpu_rounding) return launch_cpu_order_attention(p, stream);
  if (kv.type == KvElement::kF16 && decode_kernel_fits(p)) {
    return launch_decode(p, device, scratch, stream);
  }
  if (kv.type == KvElement::kF16 && prefill_kernel_fits(p, device.max_shared_bytes)) {
    return launch_prefill(p, device, scratch, stream);
  }

  // Rows per block: up to 16, fewer when there are fewer rows per KV head or shared memory
  // would not hold their queries next to the tile.
  const int64_t rows_total = call.n_tokens * p.group;
  int rows = int(std::min<int64_t>(kMaxRowsPerBlock, rows_total + rows_total % 2));
  while (rows > kRowsPerWarp && shared_bytes(rows, p.dk, p.dv) > device.max_shared_bytes) rows /= 2;
  const size_t shared = shared_bytes(rows, p.dk, p.dv);
  if (shared > device.max_shared_bytes) {
    fail("attention: head dimensions ", p.dk, "/", p.dv, " need ", shared,
         " bytes of shared memory, the device allows ", device.max_shared_bytes);
  }
  p.rows_per_block = rows;
  const int64_t row_blocks = (rows_total + rows - 1) / rows;
  if (row_blocks > int64_t(0x7fffffff) || kv.n_head_kv > 65535) {
    fail("attention: ", call.n_tokens, " tokens x ", call.n_head, " heads are too many");
  }

  // Split the cells over blocks until about two blocks per multiprocessor run, keeping at least
  // four tiles per split (decode over a long cache; prefill already fills the GPU).
  const int64_t base_blocks = row_blocks * kv.n_head_kv;
  int64_t wanted = 1;
  if (base_blocks < 2 * int64_t(device.multiprocessors)) {
    wanted = (2 * int64_t(device.multiprocessors) + base_blocks - 1) / base_blocks;
  }
  plan_splits(p, planned_span(call.pos0, call.n_tokens, call.window), wanted, kTile, 4);
  const int64_t n_splits = p.n_splits;
  if (n_splits > 1) reserve_partials(p, scratch, stream);

  const dim3 grid(unsigned(row_blocks), unsigned(kv.n_head_kv), unsigned(n_splits));
  if (kv.type == KvElement::kF16) {
    launch_typed<__half>(p, grid, shared, stream);
  } else {
    launch_typed<float>(p, grid, shared, stream);
  }
  check_launch("attention kernel");
  if (n_splits > 1) launch_combine(p, stream);
}

}  // namespace sluice::cuda
