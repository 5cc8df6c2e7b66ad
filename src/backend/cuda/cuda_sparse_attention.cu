// DeepSeek sparse attention on the device (glm-dsa): the lightning indexer's LayerNorm, its
// scores over the cached keys, each row's top-k choice, and attention restricted to the chosen
// cells — CudaBackend's layer_norm, indexer_scores, top_k_positions and attention_selected,
// with their kernels. The choice never leaves the device: top_k_positions writes positions that
// attention_selected's gather reads.
//   - layer_norm: CpuBackend's float steps (sums in double by a block reduction, so the double
//     sums differ from the host's left-to-right ones only far below float precision).
//   - indexer_scores: q · k in float with fmaf over the head dimension (the CPU's SIMD dot adds
//     in another order), the heads' ReLU-weighted terms added in head order without fusing.
//   - top_k_positions: an exact radix select of the top_k-th largest score, then the chosen
//     columns compacted in column order — the CPU's set (higher score first, lower column on a
//     tie; -0 and +0 equal) whenever the scores are the same.
//   - attention_selected: each row's cells gathered in order into a scratch cache, then the
//     ordinary attention kernels over it: the numbers of attention() on those cells.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_math.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_step_graph.h"

namespace sluice::cuda {
namespace {

constexpr int kNormThreads = 256;
constexpr int kScoreThreads = 128;  // keys per indexer_scores block, one per thread
constexpr int kTopKThreads = 512;
constexpr int64_t kMaxGridY = 65535;
// attention_selected gathers this many bytes of cells at most per launch (rows at a time).
constexpr size_t kGatherBudget = size_t(256) << 20;

// ---- layer_norm ---------------------------------------------------------------------------

// One block per row; in place is safe (each y[i] is written by the thread that read x[i], after
// both reductions).
__global__ void layer_norm_kernel(const float* x, const float* weight, const float* bias, float* y,
                                  int64_t n, float eps) {
  __shared__ double scratch[32];
  const float* in = x + int64_t(blockIdx.x) * n;
  float* out = y + int64_t(blockIdx.x) * n;
  double local = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) local += double(in[i]);
  const float mean = __fdiv_rn(__double2float_rn(block_sum(local, scratch)), float(n));
  local = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float d = __fsub_rn(in[i], mean);
    local += double(__fmul_rn(d, d));
  }
  const float variance = __double2float_rn(block_sum(local, scratch) / double(n));
  const float scale = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(variance, eps)));
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float v = __fmul_rn(__fsub_rn(in[i], mean), scale);
    if (weight != nullptr) v = __fmul_rn(v, weight[i]);
    if (bias != nullptr) v = __fadd_rn(v, bias[i]);
    out[i] = v;
  }
}

// ---- indexer_scores -----------------------------------------------------------------------

__device__ __forceinline__ float key_element(const void* k, KvElement type, int64_t i) {
  return type == KvElement::kF16 ? __half2float(static_cast<const __half*>(k)[i])
                                 : static_cast<const float*>(k)[i];
}

// Grid: (key blocks, rows). The row's queries and weights in shared memory; each thread scores
// one key: q · k per head (fmaf along the dimension), ReLU, times the weight, heads in order.
// pos0 from pos0_slot when set (a recorded step; the grid then covers the span's bucket).
__global__ void indexer_scores_kernel(const float* q, const float* w, const void* k, KvElement type,
                                      int64_t capacity, int64_t n_head, int64_t d, int64_t pos0,
                                      const int64_t* pos0_slot, int64_t n_tokens, int64_t row0,
                                      float* scores) {
  if (pos0_slot != nullptr) pos0 = *pos0_slot;
  const int64_t n_keys = pos0 + n_tokens;
  extern __shared__ float shared[];
  float* q_row = shared;               // [n_head, d]
  float* w_row = shared + n_head * d;  // [n_head]
  const int64_t t = row0 + blockIdx.y;
  for (int64_t i = threadIdx.x; i < n_head * d; i += blockDim.x) q_row[i] = q[t * n_head * d + i];
  for (int64_t i = threadIdx.x; i < n_head; i += blockDim.x) w_row[i] = w[t * n_head + i];
  __syncthreads();
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= n_keys) return;
  float score = -INFINITY;
  if (j <= pos0 + t) {
    const int64_t base = (j % capacity) * d;
    score = 0.0f;
    for (int64_t h = 0; h < n_head; ++h) {
      float dot = 0.0f;
      for (int64_t i = 0; i < d; ++i)
        dot = fmaf(q_row[h * d + i], key_element(k, type, base + i), dot);
      score = __fadd_rn(score, __fmul_rn(fmaxf(dot, 0.0f), w_row[h]));
    }
  }
  scores[t * n_keys + j] = score;
}

// ---- top_k_positions ----------------------------------------------------------------------

// A float's bits as an unsigned key in the float order (-0 taken as +0, as the host's
// comparison takes them equal).
__device__ __forceinline__ uint32_t order_key(float f) {
  if (f == 0.0f) f = 0.0f;
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) != 0 ? ~u : (u | 0x80000000u);
}

// Exclusive prefix sum of `flag` over the block (blockDim.x a multiple of 32, at most 1024);
// *total gets the block's sum. Starts and ends with a barrier.
__device__ __forceinline__ int block_exclusive_scan(int flag, int* warp_sums, int* total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
  __syncthreads();
  int inclusive = flag;
  for (int offset = 1; offset < 32; offset <<= 1) {
    const int other = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();
  int before = 0, sum = 0;
  for (int i = 0; i < n_warps; ++i) {
    if (i < warp) before += warp_sums[i];
    sum += warp_sums[i];
  }
  *total = sum;
  __syncthreads();
  return before + inclusive - flag;
}

// One block per row. The top_k-th largest key by an 8-bit radix select (4 passes over the row),
// then one ordered pass that keeps every key above it and the first `take` equal to it.
// pos0 from pos0_slot when set (a recorded step), n_cols moving with it.
__global__ void top_k_kernel(const float* scores, int64_t n_cols, int64_t pos0,
                             const int64_t* pos0_slot, int64_t top_k, int64_t row0,
                             int32_t* positions) {
  if (pos0_slot != nullptr) {
    n_cols += *pos0_slot - pos0;
    pos0 = *pos0_slot;
  }
  __shared__ int histogram[256];
  __shared__ uint32_t chosen_prefix;
  __shared__ int64_t chosen_remaining;
  __shared__ int warp_sums[32];
  const int64_t t = row0 + blockIdx.x;
  const float* row = scores + t * n_cols;
  int32_t* out = positions + t * top_k;
  const int64_t visible = min(n_cols, pos0 + t + 1);
  if (visible <= top_k) {
    for (int64_t j = threadIdx.x; j < top_k; j += blockDim.x)
      out[j] = j < visible ? int32_t(j) : -1;
    return;
  }
  uint32_t prefix = 0, mask = 0;
  int64_t remaining = top_k;  // how many of the keys matching `prefix` are still to be taken
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) histogram[i] = 0;
    __syncthreads();
    for (int64_t j = threadIdx.x; j < visible; j += blockDim.x) {
      const uint32_t key = order_key(row[j]);
      if ((key & mask) == prefix) atomicAdd(&histogram[(key >> shift) & 255u], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int64_t left = remaining;
      int digit = 255;
      for (; digit > 0; --digit) {
        if (histogram[digit] >= left) break;
        left -= histogram[digit];
      }
      chosen_prefix = prefix | (uint32_t(digit) << shift);
      chosen_remaining = left;
    }
    __syncthreads();
    prefix = chosen_prefix;
    remaining = chosen_remaining;
    mask |= 255u << shift;
  }
  // prefix: the top_k-th largest key; remaining: how many keys equal to it are taken (the
  // earliest), all larger keys being taken too.
  int64_t written = 0, equal_seen = 0;
  for (int64_t base = 0; base < visible; base += blockDim.x) {
    const int64_t j = base + threadIdx.x;
    const uint32_t key = j < visible ? order_key(row[j]) : 0u;
    const bool equal = j < visible && key == prefix;
    int equal_total = 0, taken_total = 0;
    const int equal_before = block_exclusive_scan(equal ? 1 : 0, warp_sums, &equal_total);
    const bool take =
        j < visible && (key > prefix || (equal && equal_seen + equal_before < remaining));
    const int taken_before = block_exclusive_scan(take ? 1 : 0, warp_sums, &taken_total);
    if (take) out[written + taken_before] = int32_t(j);
    written += taken_total;
    equal_seen += equal_total;
  }
}

// ---- attention_selected -------------------------------------------------------------------

// Grid-stride copy of rows' chosen cells: for row r < n_rows, cell j < top_k, the cell at
// positions[r, j] % capacity (k_cell and v_cell halves: the cells' bytes / 2) into the row's own
// [top_k] caches. A position outside the cache (never from top_k_positions) wraps, not faults.
__global__ void gather_cells_kernel(const int32_t* positions, int64_t n_rows, int64_t top_k,
                                    const uint16_t* k, const uint16_t* v, int64_t capacity,
                                    int64_t k_cell, int64_t v_cell, uint16_t* k_out,
                                    uint16_t* v_out) {
  const int64_t k_total = n_rows * top_k * k_cell, v_total = n_rows * top_k * v_cell;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < k_total + v_total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const bool is_k = i < k_total;
    const int64_t at = is_k ? i : i - k_total;
    const int64_t cell_size = is_k ? k_cell : v_cell;
    const int64_t slot = at / cell_size;  // r * top_k + j
    const int64_t cell = (int64_t(positions[slot]) % capacity + capacity) % capacity;
    if (is_k) {
      k_out[at] = k[cell * k_cell + at % cell_size];
    } else {
      v_out[at] = v[cell * v_cell + at % cell_size];
    }
  }
}

}  // namespace

void CudaBackend::layer_norm(const float* x, const float* weight, const float* bias, float* y,
                             int64_t n_rows, int64_t n, float eps) {
  OpSignature op(OpKind::kLayerNorm);
  op.add(x).add(weight).add(bias).add(y).add(n_rows).add(n).add(eps);
  if (graph_.replayed(op)) return;
  if (n_rows <= 0 || n <= 0) return;
  if (n_rows > INT32_MAX) fail("cuda: layer_norm: ", n_rows, " rows are too many");
  const float* w = weight != nullptr ? mirror_.resolve(weight, uint64_t(n)) : nullptr;
  const float* b = bias != nullptr ? mirror_.resolve(bias, uint64_t(n)) : nullptr;
  layer_norm_kernel<<<unsigned(n_rows), kNormThreads, 0, as_stream(stream_.handle())>>>(x, w, b, y,
                                                                                        n, eps);
  check_launch("layer_norm kernel");
}

// Decode-sized calls (as attention's) take their position from the step's parameter table and
// are recorded with the bucket of keys their grid covers; larger ones with their position.
void CudaBackend::indexer_scores(const float* q, const float* w, const KvLayerView& kv,
                                 int64_t n_tokens, int64_t n_head, int64_t pos0, float* scores) {
  const bool on_device = attention_position_on_device(n_tokens);
  AttentionCall span;
  span.n_tokens = n_tokens;
  span.pos0 = pos0;
  const int64_t planned_keys = on_device ? attention_planned_span(span) : pos0 + n_tokens;
  OpSignature op(OpKind::kIndexerScores);
  op.add(q).add(w).add(kv).add(n_tokens).add(n_head).add(scores);
  const bool replayed = graph_.replayed(op.add(on_device ? planned_keys : pos0));
  if (kv.n_head_kv != 1 || kv.capacity <= 0 || pos0 < 0 || n_head <= 0 || kv.head_dim_k <= 0) {
    fail("cuda: indexer_scores: ", kv.n_head_kv, " KV heads, capacity ", kv.capacity, ", position ",
         pos0, ", ", n_head, " heads");
  }
  const int64_t* slot = on_device ? graph_.position_slot(pos0) : nullptr;
  if (replayed || n_tokens <= 0) return;
  const size_t shared = sizeof(float) * size_t(n_head * kv.head_dim_k + n_head);
  if (shared > max_shared_bytes_) {
    fail("cuda: indexer_scores: ", n_head, " heads of ", kv.head_dim_k, " need ", shared,
         " bytes of shared memory, the device allows ", max_shared_bytes_);
  }
  check(cudaFuncSetAttribute(indexer_scores_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             int(shared)),
        "indexer_scores shared memory");
  const unsigned key_blocks = unsigned((planned_keys + kScoreThreads - 1) / kScoreThreads);
  for (int64_t row0 = 0; row0 < n_tokens; row0 += kMaxGridY) {
    const unsigned rows = unsigned(std::min(kMaxGridY, n_tokens - row0));
    indexer_scores_kernel<<<dim3(key_blocks, rows), kScoreThreads, shared,
                            as_stream(stream_.handle())>>>(q, w, kv.k, kv.type, kv.capacity, n_head,
                                                           kv.head_dim_k, pos0, slot, n_tokens,
                                                           row0, scores);
  }
  check_launch("indexer_scores kernel");
}

// Decode-sized calls: the position from the parameter table, n_cols - pos0 recorded (the grid is
// one block per row whatever the position).
void CudaBackend::top_k_positions(const float* scores, int64_t n_rows, int64_t n_cols, int64_t pos0,
                                  int64_t top_k, int32_t* positions) {
  const bool on_device = attention_position_on_device(n_rows);
  OpSignature op(OpKind::kTopKPositions);
  op.add(scores).add(n_rows).add(n_cols - pos0).add(top_k).add(positions);
  const bool replayed = graph_.replayed(op.add(on_device ? int64_t(0) : pos0));
  if (top_k <= 0 || top_k > INT32_MAX || pos0 < 0 || n_cols > INT32_MAX) {
    fail("cuda: top_k_positions: top_k ", top_k, ", position ", pos0, ", ", n_cols, " columns");
  }
  const int64_t* slot = on_device ? graph_.position_slot(pos0) : nullptr;
  if (replayed) return;
  for (int64_t row0 = 0; row0 < n_rows; row0 += INT32_MAX) {
    const unsigned rows = unsigned(std::min<int64_t>(INT32_MAX, n_rows - row0));
    top_k_kernel<<<rows, kTopKThreads, 0, as_stream(stream_.handle())>>>(scores, n_cols, pos0, slot,
                                                                         top_k, row0, positions);
  }
  check_launch("top_k_positions kernel");
}

// Rows at a time (as many as kGatherBudget holds): one gather launch, then each row's attention
// over its gathered cache (one query at the last of top_k cells).
void CudaBackend::attention_selected(const AttentionCall& call, const int32_t* positions,
                                     int64_t top_k) {
  // The rows' positions reach the kernels only through `positions` (device memory).
  OpSignature op(OpKind::kAttentionSelected);
  op.add(call.q).add(call.out).add(call.n_tokens).add(call.n_head);
  op.add(call.window).add(call.scale).add(call.softcap).add(call.sinks).add(call.kv);
  if (graph_.replayed(op.add(positions).add(top_k))) return;
  const KvLayerView& kv = call.kv;
  if (call.window != 0 || call.sinks != nullptr || top_k <= 0 || kv.capacity <= 0) {
    fail("cuda: attention_selected: window ", call.window, ", top_k ", top_k, ", capacity ",
         kv.capacity, (call.sinks != nullptr ? ", sinks" : ""));
  }
  if (call.n_tokens <= 0) return;
  const size_t element = kv.type == KvElement::kF16 ? 2 : 4;
  const int64_t k_cell = kv.n_head_kv * kv.head_dim_k * int64_t(element) / 2;  // in halves
  const int64_t v_cell = kv.n_head_kv * kv.head_dim_v * int64_t(element) / 2;
  const size_t row_bytes = size_t(top_k * (k_cell + v_cell)) * 2;
  const int64_t rows_per_gather =
      std::clamp<int64_t>(int64_t(kGatherBudget / row_bytes), 1, call.n_tokens);
  const size_t bytes = size_t(rows_per_gather) * row_bytes;
  if (selected_cells_.size() < bytes) {
    refuse_growth_while_capturing(stream_.handle(), "the selected attention's cells");
    stream_.synchronize();  // kernels queued earlier may still read the old cells
    selected_cells_.reserve(bytes);
  }
  auto* k_out = selected_cells_.as<uint16_t>();
  uint16_t* v_out = k_out + rows_per_gather * top_k * k_cell;
  const cudaStream_t stream = as_stream(stream_.handle());
  const int64_t q_row = call.n_head * kv.head_dim_k, out_row = call.n_head * kv.head_dim_v;
  for (int64_t r0 = 0; r0 < call.n_tokens; r0 += rows_per_gather) {
    const int64_t rows = std::min(rows_per_gather, call.n_tokens - r0);
    constexpr int kThreads = 256;
    gather_cells_kernel<<<grid_for(rows * top_k * (k_cell + v_cell), kThreads), kThreads, 0,
                          stream>>>(
        positions + r0 * top_k, rows, top_k, static_cast<const uint16_t*>(kv.k),
        static_cast<const uint16_t*>(kv.v), kv.capacity, k_cell, v_cell, k_out, v_out);
    check_launch("attention_selected gather kernel");
    for (int64_t r = 0; r < rows; ++r) {
      AttentionCall one = call;
      one.q = call.q + (r0 + r) * q_row;
      one.out = call.out + (r0 + r) * out_row;
      one.n_tokens = 1;
      one.pos0 = top_k - 1;
      one.kv.k = k_out + r * top_k * k_cell;
      one.kv.v = v_out + r * top_k * v_cell;
      one.kv.capacity = top_k;
      launch_attention(one, nullptr, AttentionDevice{multiprocessors_, max_shared_bytes_},
                       attention_scratch_, stream);
    }
  }
}

}  // namespace sluice::cuda
