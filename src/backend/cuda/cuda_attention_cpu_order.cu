// Attention over F16 cells in the CPU backend's order of operations (cpu_attention.cpp), for
// CudaBackend's CPU rounding (cuda_backend.h): the same products, sums, exponentials and half
// roundings, so that the two backends' results differ only where a libm function rounds the
// other way (1 ulp, rare) and greedy decoding follows the same tokens. One block per (token,
// query head); parallel over cells for the scores and over the head's dimensions for the
// accumulator, whose updates run in the CPU's cell order.
//   - Chunks of fewer than 64 tokens (decode): the query rounded to half, each score the CPU's
//     half dot product (32 fused lanes, then its pairwise reduction, the tail in double), an
//     online softmax with libm's exp, and a half accumulator rounded after every update.
//   - Chunks of 64 tokens or more (head_dim_v a multiple of 8): tiles of 64 cells from a multiple
//     of 64, float32 query, each score one fused chain, one maximum and rescale per tile, the
//     polynomial exp summed per 8 in double, and a float32 accumulator.
// Slower than the split-K kernels (the accumulator walks the cells one by one); chosen only
// when CPU rounding is asked for.
#include <cuda_fp16.h>

#include "backend/cuda/cuda_attention_params.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_math.cuh"

namespace sluice::cuda {
namespace {

constexpr int kThreads = 128;                // also the cells scored per chunk of the half path
constexpr int kTileCells = 64;               // the CPU's tile (cpu_attention.cpp kTile)
constexpr int kMaxValues = 1024 / kThreads;  // accumulator elements per thread (dv <= 1024)

struct Row {
  int64_t t, head, kv_head, pos, first;
};

__device__ Row block_row(const AttentionParams& p) {
  Row r;
  r.t = int64_t(blockIdx.x) / p.n_head;
  r.head = int64_t(blockIdx.x) % p.n_head;
  r.kv_head = r.head / p.group;
  r.pos = first_position(p) + r.t;
  r.first = first_visible(p, r.pos);
  return r;
}

__device__ __forceinline__ float score(const AttentionParams& p, float dot) {
  float s = __fmul_rn(dot, p.scale);
  if (p.softcap > 0.0f) s = __fmul_rn(p.softcap, libm_tanhf(__fdiv_rn(s, p.softcap)));
  return s;
}

__device__ __forceinline__ float round_half(float x) {
  return __half2float(__float2half_rn(x));
}

// cpu::dot_f16 (f16_rows.cpp): lane l of four 8-lane accumulators takes elements l mod 32, then
// (a0 + a2) + (a1 + a3) per lane, the 128-bit halves added, (h0 + h1) + (h2 + h3), the tail in
// double.
__device__ float half_dot(const __half* a, const __half* b, int64_t n) {
  float lane[32];
#pragma unroll
  for (int l = 0; l < 32; ++l) lane[l] = 0.0f;
  const int64_t n32 = n & ~int64_t(31);
  for (int64_t i = 0; i < n32; i += 32) {
#pragma unroll
    for (int l = 0; l < 32; ++l) {
      lane[l] = __fmaf_rn(__half2float(a[i + l]), __half2float(b[i + l]), lane[l]);
    }
  }
  float lanes[8];
#pragma unroll
  for (int l = 0; l < 8; ++l) {
    lanes[l] = __fadd_rn(__fadd_rn(lane[l], lane[16 + l]), __fadd_rn(lane[8 + l], lane[24 + l]));
  }
  float h[4];
#pragma unroll
  for (int l = 0; l < 4; ++l) h[l] = __fadd_rn(lanes[l], lanes[l + 4]);
  double total = double(__fadd_rn(__fadd_rn(h[0], h[1]), __fadd_rn(h[2], h[3])));
  for (int64_t i = n32; i < n; ++i) {
    total = __dadd_rn(total, double(__fmul_rn(__half2float(a[i]), __half2float(b[i]))));
  }
  return float(total);
}

// cpu HeadAttention::finish: the sink joins the sum, then out = acc / sum.
__device__ void finish(const AttentionParams& p, const Row& r, float* acc, float max_score,
                       float sum) {
  float rescale = 1.0f;
  if (p.sinks != nullptr) {
    const float sink = p.sinks[r.head];
    if (sink > max_score) {
      rescale = libm_expf(__fsub_rn(max_score, sink));
      sum = __fmaf_rn(sum, rescale, 1.0f);
    } else {
      sum = __fadd_rn(sum, libm_expf(__fsub_rn(sink, max_score)));
    }
  }
  const float inv = sum == 0.0f ? 0.0f : __fdiv_rn(1.0f, sum);
  float* out = p.out + (r.t * p.n_head + r.head) * p.dv;
#pragma unroll
  for (int j = 0; j < kMaxValues; ++j) {
    const int64_t d = threadIdx.x + int64_t(j) * kThreads;
    if (d >= p.dv) break;
    float v = acc[j];
    if (p.sinks != nullptr && rescale != 1.0f) v = __fmul_rn(v, rescale);
    out[d] = __fmul_rn(v, inv);
  }
}

// cpu HeadAttention::run_half.
__global__ void __launch_bounds__(kThreads) half_order_kernel(AttentionParams p) {
  extern __shared__ unsigned char shared_bytes[];
  auto* q_half = reinterpret_cast<__half*>(shared_bytes);  // [dk]
  __shared__ float prefix_max[kThreads], old_scale[kThreads], weight[kThreads];
  __shared__ float running[2];  // max, sum
  const Row r = block_row(p);
  const auto* keys = static_cast<const __half*>(p.k);
  const auto* values = static_cast<const __half*>(p.v);
  for (int64_t d = threadIdx.x; d < p.dk; d += kThreads) {
    q_half[d] = __float2half_rn(p.q[(r.t * p.n_head + r.head) * p.dk + d]);
  }
  float acc[kMaxValues];
#pragma unroll
  for (int j = 0; j < kMaxValues; ++j) acc[j] = 0.0f;
  if (threadIdx.x == 0) running[0] = -INFINITY, running[1] = 0.0f;
  const bool tail = (p.dv & 7) != 0;
  const int64_t n8 = p.dv & ~int64_t(7);
  for (int64_t c0 = r.first; c0 <= r.pos; c0 += kThreads) {
    const int n_in = int(min(int64_t(kThreads), r.pos - c0 + 1));
    __syncthreads();  // q_half written; the previous chunk's tables read
    const int i = threadIdx.x;
    float s = -INFINITY;
    const int64_t c0_cell = c0 % p.capacity;  // cell i: ring_cell (i < n_in <= capacity)
    if (i < n_in) {
      const int64_t cell = ring_cell(c0_cell, i, p.capacity);
      s = score(p, half_dot(keys + (cell * p.n_head_kv + r.kv_head) * p.dk, q_half, p.dk));
    }
    // The maximum before each cell: the CPU's running max (it changes only on a strictly
    // greater score, so it is the prefix maximum); an inclusive scan, shifted by one.
    prefix_max[i] = s;
    for (int step = 1; step < kThreads; step <<= 1) {
      __syncthreads();
      const float other = i >= step ? prefix_max[i - step] : -INFINITY;
      __syncthreads();
      prefix_max[i] = fmaxf(prefix_max[i], other);
    }
    __syncthreads();
    const float before = i == 0 ? running[0] : fmaxf(running[0], prefix_max[i - 1]);
    if (s > before) {
      old_scale[i] = libm_expf(__fsub_rn(before, s));
      weight[i] = 1.0f;
    } else {
      old_scale[i] = 1.0f;
      weight[i] = libm_expf(__fsub_rn(s, before));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      float sum = running[1];
      for (int j = 0; j < n_in; ++j) sum = __fadd_rn(__fmul_rn(sum, old_scale[j]), weight[j]);
      running[1] = sum;
      running[0] = fmaxf(running[0], prefix_max[n_in - 1]);
    }
#pragma unroll
    for (int j = 0; j < kMaxValues; ++j) {
      const int64_t d = threadIdx.x + int64_t(j) * kThreads;
      if (d >= p.dv) break;
      float a = acc[j];
      for (int k = 0; k < n_in; ++k) {
        const int64_t cell = ring_cell(c0_cell, k, p.capacity);
        // The CPU rescales only on a new maximum; by 1 there it changes nothing.
        if (old_scale[k] != 1.0f) a = round_half(__fmul_rn(a, old_scale[k]));
        const float v = __half2float(values[(cell * p.n_head_kv + r.kv_head) * p.dv + d]);
        a = tail && d >= n8 ? round_half(__fadd_rn(__fmul_rn(v, weight[k]), a))
                            : round_half(__fmaf_rn(v, weight[k], a));
      }
      acc[j] = a;
    }
  }
  __syncthreads();
  finish(p, r, acc, running[0], running[1]);
}

// cpu HeadAttention::run_tiled.
__global__ void __launch_bounds__(kThreads) tiled_order_kernel(AttentionParams p) {
  extern __shared__ unsigned char shared_bytes[];
  auto* q = reinterpret_cast<float*>(shared_bytes);  // [dk]
  __shared__ float weights[kTileCells];
  __shared__ float tile_rescale, tile_max_shared;
  __shared__ float running[2];  // max, sum
  __shared__ float reduce_scratch[32];
  const Row r = block_row(p);
  const auto* keys = static_cast<const __half*>(p.k);
  const auto* values = static_cast<const __half*>(p.v);
  for (int64_t d = threadIdx.x; d < p.dk; d += kThreads) {
    q[d] = p.q[(r.t * p.n_head + r.head) * p.dk + d];
  }
  float acc[kMaxValues];
#pragma unroll
  for (int j = 0; j < kMaxValues; ++j) acc[j] = 0.0f;
  if (threadIdx.x == 0) running[0] = -INFINITY, running[1] = 0.0f;
  for (int64_t tile = r.first - r.first % kTileCells; tile <= r.pos; tile += kTileCells) {
    __syncthreads();  // q written; the previous tile's weights read
    const int j = threadIdx.x;
    float s = -INFINITY;
    if (j < kTileCells) {
      const int64_t cell_pos = tile + j;
      if (cell_pos >= r.first && cell_pos <= r.pos) {
        const __half* k = keys + ((cell_pos % p.capacity) * p.n_head_kv + r.kv_head) * p.dk;
        float dot = 0.0f;
        for (int64_t d = 0; d < p.dk; ++d) dot = __fmaf_rn(q[d], __half2float(k[d]), dot);
        s = score(p, dot);
      }
      weights[j] = s;
    }
    const float tile_max = block_max(s, reduce_scratch);
    if (tile_max == -INFINITY) continue;  // the same in every thread
    if (threadIdx.x == 0) {
      const float max_score = running[0];
      const float new_max = fmaxf(max_score, tile_max);
      tile_rescale = 1.0f;
      if (new_max > max_score) {
        tile_rescale = libm_expf(__fsub_rn(max_score, new_max));
        running[1] = __fmul_rn(running[1], tile_rescale);
      }
      running[0] = new_max;
      tile_max_shared = new_max;
    }
    __syncthreads();
    if (j < kTileCells) weights[j] = exp_polynomial(__fsub_rn(weights[j], tile_max_shared));
    __syncthreads();
    if (threadIdx.x == 0) {
      double tile_sum = 0.0;
      for (int g = 0; g < kTileCells; g += 8) {
        const float* e = weights + g;
        const float h0 = __fadd_rn(e[0], e[4]), h1 = __fadd_rn(e[1], e[5]);
        const float h2 = __fadd_rn(e[2], e[6]), h3 = __fadd_rn(e[3], e[7]);
        tile_sum = __dadd_rn(tile_sum, double(__fadd_rn(__fadd_rn(h0, h2), __fadd_rn(h1, h3))));
      }
      running[1] = float(__dadd_rn(double(running[1]), tile_sum));
    }
    const bool rescale = tile_rescale != 1.0f;
#pragma unroll
    for (int k = 0; k < kMaxValues; ++k) {
      const int64_t d = threadIdx.x + int64_t(k) * kThreads;
      if (d >= p.dv) break;
      float a = rescale ? __fmul_rn(acc[k], tile_rescale) : acc[k];
      for (int c = 0; c < kTileCells; ++c) {
        const int64_t cell_pos = tile + c;
        if (cell_pos < r.first || cell_pos > r.pos) continue;
        const __half* v = values + ((cell_pos % p.capacity) * p.n_head_kv + r.kv_head) * p.dv;
        a = __fmaf_rn(weights[c], __half2float(v[d]), a);
      }
      acc[k] = a;
    }
  }
  __syncthreads();
  finish(p, r, acc, running[0], running[1]);
}

}  // namespace

bool cpu_order_tiled(const AttentionParams& p) {
  return p.n_tokens >= kCpuTiledMinTokens && p.dv % 8 == 0;
}

void launch_cpu_order_attention(const AttentionParams& p, cudaStream_t stream) {
  if (p.dk > 1024 || p.dv > kMaxValues * kThreads) {
    fail("attention (CPU rounding): head dimension ", p.dk, "/", p.dv, " exceeds 1024");
  }
  const int64_t blocks = p.n_tokens * p.n_head;
  if (blocks > int64_t(0x7fffffff)) fail("attention: ", p.n_tokens, " tokens are too many");
  if (cpu_order_tiled(p)) {
    tiled_order_kernel<<<unsigned(blocks), kThreads, sizeof(float) * size_t(p.dk), stream>>>(p);
  } else {
    half_order_kernel<<<unsigned(blocks), kThreads, sizeof(__half) * size_t(p.dk), stream>>>(p);
  }
  check_launch("attention kernel (CPU rounding)");
}

}  // namespace sluice::cuda
