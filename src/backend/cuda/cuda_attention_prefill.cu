// Prefill attention over an F16 KV cache on tensor cores (flash attention 2). A block of 4 warps
// owns 64 (token, query head) rows that share one KV head (GQA: rows r = token * group + head in
// group) and one chunk of the cells they see (the split; usually the whole causal range). Each
// warp carries 16 rows. The queries are rounded to f16 once into shared memory; K and V are
// walked in tiles of 64 cells, double buffered in shared memory by cp.async (tile t+1 loads while
// tile t is computed; cells past the block's last position are zero-filled, never read). Per tile
// and warp:
//   1. S = Q·Kᵀ (16 × 64) with mma.sync m16n8k16 f16 × f16 → f32;
//   2. scale, softcap, mask (causal with pos0, window; ring cells = position % capacity), then an
//      online softmax step in f32 (exp2 of log2e-scaled scores; running max per row shared by the
//      4 lanes that hold it; the running sum kept per lane and summed at the end);
//   3. P rounded to f16 straight from the S registers (their layout is the A operand's), V loaded
//      transposed by ldmatrix, O += P·V with f32 accumulation.
// Sinks join the denominator at the end (as ggml), or in the combine kernel when split.
//
// Rounding: Q and P are rounded to f16 (relative 2^-11 each); K and V are f16 already. The sum of
// the weights uses the unrounded f32 P, so the output is within 2^-11 of the f32 result relative
// to Σ p|v|, plus the query's rounding through the scores (tests/backend/cuda_backend_test.cpp).
#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/cuda_attention_params.h"
#include "backend/cuda/cuda_check.h"

namespace sluice::cuda {
namespace {

constexpr int kThreads = 128;          // 4 warps
constexpr int kRows = kPrefillRows;    // rows per block, 16 per warp
constexpr int kCells = kPrefillCells;  // cells per K/V tile
constexpr int kPad = 8;  // halves of padding per shared row: conflict-free fragment loads
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

__device__ __forceinline__ void copy_async_16(void* shared_dst, const void* global_src,
                                              bool valid) {
  const unsigned dst = unsigned(__cvta_generic_to_shared(shared_dst));
  const int src_bytes = valid ? 16 : 0;  // 0: the 16 bytes are zero-filled
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(global_src),
               "r"(src_bytes));
}
__device__ __forceinline__ void copy_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
__device__ __forceinline__ void copy_async_wait_all() {
  asm volatile("cp.async.wait_group 0;\n" ::);
}

// D (16×8, f32) += A (16×16, f16, row) · B (16×8, f16, col).
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                          unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8×8 f16 matrices, transposed: lane l supplies the address of row l % 8 of matrix l / 8.
__device__ __forceinline__ void load_matrix_x4_trans(unsigned (&r)[4], const __half* row) {
  const unsigned addr = unsigned(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const unsigned*>(&h);
}

__device__ __forceinline__ unsigned shared_word(const __half* p) {
  return *reinterpret_cast<const unsigned*>(p);
}

template <int D>
__global__ void __launch_bounds__(kThreads, D <= 128 ? 2 : 1) prefill_kernel(AttentionParams p) {
  constexpr int kStride = D + kPad;  // halves per shared row (16-byte multiple)
  constexpr int kChunks = D / 8;     // 16-byte pieces per row
  constexpr int kDimTiles = D / 8;   // n-tiles of the output
  extern __shared__ __align__(16) __half shared[];
  __half* q_s = shared;                      // [kRows][kStride]
  __half* k_s = q_s + kRows * kStride;       // [2][kCells][kStride]
  __half* v_s = k_s + 2 * kCells * kStride;  // [2][kCells][kStride]

  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int warp = tid / 32;
  const int g = lane / 4;  // fragment row (and B column) of this lane
  const int t4 = lane % 4;
  const int64_t kv_head = blockIdx.y;
  const int64_t rows_total = p.n_tokens * p.group;
  // Row blocks in reverse: the late tokens see the most cells, so they start first.
  const int64_t row0 = int64_t(gridDim.x - 1 - blockIdx.x) * kRows;
  const int n_rows = int(min(int64_t(kRows), rows_total - row0));
  const auto* keys = static_cast<const __half*>(p.k);
  const auto* values = static_cast<const __half*>(p.v);

  // Queries → f16 in shared memory (zeros for rows past the end).
  for (int i = tid; i < kRows * (D / 4); i += kThreads) {
    const int r = i / (D / 4), c = i % (D / 4);
    float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (r < n_rows) {
      const int64_t row = row0 + r;
      const int64_t head = kv_head * p.group + row % p.group;
      x = reinterpret_cast<const float4*>(p.q + ((row / p.group) * p.n_head + head) * D)[c];
    }
    __half2* dst = reinterpret_cast<__half2*>(q_s + r * kStride + 4 * c);
    dst[0] = __floats2half2_rn(x.x, x.y);
    dst[1] = __floats2half2_rn(x.z, x.w);
  }

  // This block's cells: what its rows see, this split's share of it.
  const int64_t block_lo = first_visible(p, p.pos0 + row0 / p.group);
  const int64_t block_hi = p.pos0 + (row0 + n_rows - 1) / p.group;
  const int64_t lo = block_lo + int64_t(blockIdx.z) * p.split_len;
  const int64_t hi = min(block_hi, lo + p.split_len - 1);
  const int n_tiles = hi >= lo ? int((hi - lo + kCells) / kCells) : 0;

  // This lane's two rows (g and g + 8 of the warp's 16): visible positions relative to `lo`.
  int64_t vis_lo[2], vis_hi[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t row = min(row0 + warp * 16 + g + 8 * i, rows_total - 1);
    const int64_t pos = p.pos0 + row / p.group;
    vis_lo[i] = first_visible(p, pos) - lo;
    vis_hi[i] = min(pos, hi) - lo;
  }

  const auto issue_tile = [&](int tile) {
    const int buf = tile & 1;
    const int64_t start = lo + int64_t(tile) * kCells;
    for (int i = tid; i < kCells * kChunks; i += kThreads) {
      const int c = i / kChunks, piece = i % kChunks;
      const int64_t pos = start + c;
      const bool valid = pos <= hi;
      const int64_t cell = pos < p.capacity ? pos : pos % p.capacity;
      const int64_t at = valid ? (cell * p.n_head_kv + kv_head) * D + piece * 8 : 0;
      copy_async_16(k_s + (buf * kCells + c) * kStride + piece * 8, keys + at, valid);
      copy_async_16(v_s + (buf * kCells + c) * kStride + piece * 8, values + at, valid);
    }
    copy_async_commit();
  };

  float acc[kDimTiles][4];
#pragma unroll
  for (int n = 0; n < kDimTiles; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  float run_max[2] = {-INFINITY, -INFINITY};  // log2 domain
  float run_sum[2] = {0.0f, 0.0f};            // this lane's share of the row's sum
  const float scale2 = p.scale * kLog2e;
  const __half* q_warp = q_s + warp * 16 * kStride;

  if (n_tiles > 0) issue_tile(0);
  for (int tile = 0; tile < n_tiles; ++tile) {
    copy_async_wait_all();
    __syncthreads();  // tile `tile` visible to all; everyone is done with the other buffer
    if (tile + 1 < n_tiles) issue_tile(tile + 1);
    const __half* k_tile = k_s + (tile & 1) * kCells * kStride;
    const __half* v_tile = v_s + (tile & 1) * kCells * kStride;

    // 1. S = Q·Kᵀ: 8 n-tiles of 8 cells.
    float s[kCells / 8][4];
#pragma unroll
    for (int n = 0; n < kCells / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int k = 0; k < D / 16; ++k) {
      unsigned a[4];
      const __half* q0 = q_warp + g * kStride + k * 16 + 2 * t4;
      a[0] = shared_word(q0);
      a[1] = shared_word(q0 + 8 * kStride);
      a[2] = shared_word(q0 + 8);
      a[3] = shared_word(q0 + 8 * kStride + 8);
#pragma unroll
      for (int n = 0; n < kCells / 8; ++n) {
        const __half* k0 = k_tile + (n * 8 + g) * kStride + k * 16 + 2 * t4;
        mma_16816(s[n], a, shared_word(k0), shared_word(k0 + 8));
      }
    }

    // 2. Scores, mask, online softmax. Element j of n-tile n: row g + 8 (j / 2), cell
    //    n * 8 + 2 t4 + j % 2 of the tile.
    const int64_t tile_rel = int64_t(tile) * kCells;
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kCells / 8; ++n) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int i = j / 2;
        const int64_t rel = tile_rel + n * 8 + 2 * t4 + (j % 2);
        float x;
        if (p.softcap > 0.0f) {
          x = p.softcap * tanhf(s[n][j] * p.scale / p.softcap) * kLog2e;
        } else {
          x = s[n][j] * scale2;
        }
        if (rel < vis_lo[i] || rel > vis_hi[i]) x = -INFINITY;
        s[n][j] = x;
        tile_max[i] = fmaxf(tile_max[i], x);
      }
    }
    float rescale[2], base[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 1));
      tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 2));
      const float new_max = fmaxf(run_max[i], tile_max[i]);
      base[i] = new_max == -INFINITY ? 0.0f : new_max;  // nothing seen yet: all weights 0
      rescale[i] = exp2f(run_max[i] - base[i]);         // 0 while nothing was seen
      run_max[i] = new_max;
      run_sum[i] *= rescale[i];
    }
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n) {
      acc[n][0] *= rescale[0];
      acc[n][1] *= rescale[0];
      acc[n][2] *= rescale[1];
      acc[n][3] *= rescale[1];
    }
#pragma unroll
    for (int n = 0; n < kCells / 8; ++n) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float w = exp2f(s[n][j] - base[j / 2]);
        s[n][j] = w;
        run_sum[j / 2] += w;
      }
    }

    // 3. O += P·V: 4 k-steps of 16 cells; the A fragment is two S n-tiles rounded to f16.
#pragma unroll
    for (int k = 0; k < kCells / 16; ++k) {
      unsigned a[4];
      a[0] = pack_half2(s[2 * k][0], s[2 * k][1]);
      a[1] = pack_half2(s[2 * k][2], s[2 * k][3]);
      a[2] = pack_half2(s[2 * k + 1][0], s[2 * k + 1][1]);
      a[3] = pack_half2(s[2 * k + 1][2], s[2 * k + 1][3]);
      const int m = lane / 8;  // matrix this lane addresses: cells +8 (m & 1), dims +8 (m >> 1)
      const __half* v_row = v_tile + (k * 16 + (m & 1) * 8 + lane % 8) * kStride + (m >> 1) * 8;
#pragma unroll
      for (int n = 0; n < kDimTiles; n += 2) {
        unsigned b[4];
        load_matrix_x4_trans(b, v_row + n * 8);
        mma_16816(acc[n], a, b[0], b[1]);
        mma_16816(acc[n + 1], a, b[2], b[3]);
      }
    }
  }

  // The row's sum over its 4 lanes; then the output or this split's partial.
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    run_sum[i] += __shfl_xor_sync(0xffffffffu, run_sum[i], 1);
    run_sum[i] += __shfl_xor_sync(0xffffffffu, run_sum[i], 2);
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = warp * 16 + g + 8 * i;
    if (r >= n_rows) continue;
    const int64_t row = row0 + r;
    const int64_t out_row = (row / p.group) * p.n_head + kv_head * p.group + row % p.group;
    const float m_nat = run_max[i] == -INFINITY ? -INFINITY : run_max[i] * kLn2;
    if (p.n_splits > 1) {
      const int64_t part = out_row * p.n_splits + blockIdx.z;
      float* dst = p.partial_acc + part * D + 2 * t4;
#pragma unroll
      for (int n = 0; n < kDimTiles; ++n) {
        *reinterpret_cast<float2*>(dst + n * 8) = make_float2(acc[n][2 * i], acc[n][2 * i + 1]);
      }
      if (t4 == 0) {
        p.partial_stat[2 * part] = m_nat;
        p.partial_stat[2 * part + 1] = run_sum[i];
      }
      continue;
    }
    float l = run_sum[i];
    float factor = 1.0f;
    if (p.sinks != nullptr) {
      const float sink = p.sinks[out_row % p.n_head];
      const float new_max = fmaxf(m_nat, sink);
      factor = expf(m_nat - new_max);  // 0 when nothing was seen (m_nat = -inf)
      l = l * factor + expf(sink - new_max);
    }
    const float inv = l == 0.0f ? 0.0f : factor / l;
    float* dst = p.out + out_row * D + 2 * t4;
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n) {
      *reinterpret_cast<float2*>(dst + n * 8) =
          make_float2(acc[n][2 * i] * inv, acc[n][2 * i + 1] * inv);
    }
  }
}

template <int D>
void launch(const AttentionParams& p, dim3 grid, cudaStream_t stream) {
  const size_t shared = prefill_shared_bytes(D);
  check(cudaFuncSetAttribute(prefill_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             int(shared)),
        "prefill attention shared memory");
  prefill_kernel<D><<<grid, kThreads, shared, stream>>>(p);
}

}  // namespace

size_t prefill_shared_bytes(int64_t head_dim) {
  return sizeof(__half) * size_t(kRows + 4 * kCells) * size_t(head_dim + kPad);
}

bool prefill_kernel_fits(const AttentionParams& p, size_t max_shared_bytes) {
  const bool dims = p.dk == p.dv && (p.dk == 64 || p.dk == 128 || p.dk == 256);
  const auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  return p.n_tokens > kDecodeMaxTokens && dims && aligned(p.q) && aligned(p.k) && aligned(p.v) &&
         aligned(p.out) && prefill_shared_bytes(p.dk) <= max_shared_bytes;
}

void launch_prefill_attention(const AttentionParams& p, dim3 grid, cudaStream_t stream) {
  switch (p.dk) {
    case 64:
      return launch<64>(p, grid, stream);
    case 128:
      return launch<128>(p, grid, stream);
    case 256:
      return launch<256>(p, grid, stream);
    default:
      fail("attention: the prefill kernel has no head dimension ", p.dk);
  }
}

}  // namespace sluice::cuda
