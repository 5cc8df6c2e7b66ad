// The matvec (decode), tiled matmul (prefill) and get_rows kernels, written once over
// BlockDecoder (quant_decode.cuh) and instantiated per type by the quant_kernels_*.cu files.
//
// Decode (n_tokens <= 8): a block of 4 warps owns kRows weight rows; its 128 threads walk the
// row's groups of 8 elements side by side (consecutive threads, consecutive bytes), so every
// weight byte is read once, and each decoded group is multiplied with all tokens' activations
// while it sits in registers. Float accumulation, warp-shuffle then shared-memory reduction.
//
// Prefill (n_tokens > 8): 128 rows x 64 tokens per block of 8 warps; per 64-column step the
// weight tile is decoded into shared memory as f16 and the activation tile rounded to f16, then
// multiplied on the tensor cores (wmma 16x16x16, f32 accumulation). Rounding both operands to
// f16 bounds each product's relative error by about 2^-10 (see README: tolerance), and
// activations must stay inside f16's range (|x| < 65504).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>
#include <string>

#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/quant_decode.cuh"
#include "backend/cuda/quant_int8_pieces.cuh"
#include "backend/cuda/quant_kernel_set.h"

namespace sluice::cuda::quant {
namespace {

// Types whose decoders read the __device__ tables.
constexpr bool uses_tables(QType type) {
  switch (type) {
    case QType::IQ4_NL:
    case QType::MXFP4:
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

bool launched(const char* kernel, std::string* error) {
  const cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) return true;
  if (error) *error = std::string("cuda ") + kernel + ": " + cudaGetErrorString(status);
  return false;
}

// Element group G (8 elements from column 8G) of a row, decoded.
template <QType kType, bool kExact>
__device__ __forceinline__ void decode_group(const uint8_t* row, int group, float* v) {
  using D = BlockDecoder<kType>;
  constexpr int kGroupsPerBlock = D::kElems / 8;
  const int block = group / kGroupsPerBlock;
  D::template decode<kExact>(row + int64_t(block) * D::kBytes, group % kGroupsPerBlock, v);
}

// ---- decode: matrix-vector ---------------------------------------------------------------

constexpr int kMatvecThreads = 128;

// More rows per block when there are more tokens: the activations are reused more.
constexpr int matvec_rows_per_block(int n_tokens) {
  return n_tokens <= 2 ? 2 : 4;
}

// The block's work: rows row0 .. row0 + kRows - 1 of w times kTokens activation rows. Shared by
// matvec_kernel and the experts' by-id kernel (quant_expert_kernels.cuh), so both compute alike.
template <QType kType, int kTokens, int kRows>
__device__ __forceinline__ void matvec_rows(const uint8_t* __restrict__ w, int64_t row_bytes,
                                            int64_t n_rows, int n_groups,
                                            const float* __restrict__ x, int64_t n_cols,
                                            float* __restrict__ y, int64_t row0) {
  const uint8_t* rows[kRows];
  for (int r = 0; r < kRows; ++r) {
    const int64_t row = row0 + r < n_rows ? row0 + r : n_rows - 1;  // tail rows: read, not written
    rows[r] = w + row * row_bytes;
  }
  float acc[kRows][kTokens] = {};
#pragma unroll 2
  for (int group = threadIdx.x; group < n_groups; group += kMatvecThreads) {
    float xs[kTokens][8];
    for (int t = 0; t < kTokens; ++t) {
      const float4* xp = reinterpret_cast<const float4*>(x + t * n_cols + 8 * int64_t(group));
      const float4 a = __ldg(xp), b = __ldg(xp + 1);
      xs[t][0] = a.x, xs[t][1] = a.y, xs[t][2] = a.z, xs[t][3] = a.w;
      xs[t][4] = b.x, xs[t][5] = b.y, xs[t][6] = b.z, xs[t][7] = b.w;
    }
    for (int r = 0; r < kRows; ++r) {
      float v[8];
      decode_group<kType, false>(rows[r], group, v);
      for (int t = 0; t < kTokens; ++t) {
        for (int j = 0; j < 8; ++j) acc[r][t] = fmaf(v[j], xs[t][j], acc[r][t]);
      }
    }
  }
  __shared__ float partial[kMatvecThreads / 32][kRows][kTokens];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int r = 0; r < kRows; ++r) {
    for (int t = 0; t < kTokens; ++t) {
      float s = acc[r][t];
      for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
      if (lane == 0) partial[warp][r][t] = s;
    }
  }
  __syncthreads();
  if (threadIdx.x < kRows * kTokens) {
    const int r = threadIdx.x / kTokens, t = threadIdx.x % kTokens;
    if (row0 + r < n_rows) {
      float s = 0.0f;
      for (int k = 0; k < kMatvecThreads / 32; ++k) s += partial[k][r][t];
      y[t * n_rows + row0 + r] = s;
    }
  }
}

template <QType kType, int kTokens, int kRows>
__global__ void __launch_bounds__(kMatvecThreads)
    matvec_kernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t n_rows, int n_groups,
                  const float* __restrict__ x, int64_t n_cols, float* __restrict__ y) {
  wait_for_prerequisite();  // launched as a dependent (cuda_launch.cuh)
  matvec_rows<kType, kTokens, kRows>(w, row_bytes, n_rows, n_groups, x, n_cols, y,
                                     int64_t(blockIdx.x) * kRows);
  allow_dependent_launch();  // as the int8 products: once the block's rows are done
}

template <QType kType, int kTokens>
bool launch_matvec(const MatmulArgs& a, std::string* error) {
  constexpr int kRows = matvec_rows_per_block(kTokens);
  const int64_t blocks = (a.n_rows + kRows - 1) / kRows;
  launch_chained(matvec_kernel<kType, kTokens, kRows>, dim3(unsigned(blocks)), dim3(kMatvecThreads),
                 0, static_cast<cudaStream_t>(a.stream), static_cast<const uint8_t*>(a.w),
                 a.row_bytes, a.n_rows, int(a.n_cols / 8), a.x, a.n_cols, a.y);
  return launched("matvec", error);
}

// The float types' products in the CPU kernels' order (quant_int8_cpu_order.cuh).
template <QType kType>
bool launch_cpu_order_float(const MatmulArgs& a, std::string* error) {
  const dim3 blocks(unsigned((a.n_rows + kInt8RowsPerBlock - 1) / kInt8RowsPerBlock));
  const auto stream = static_cast<cudaStream_t>(a.stream);
  const auto* w = static_cast<const uint8_t*>(a.w);
  if (a.cpu_order == CpuOrder::kAvx512) {
    launch_chained(cpu_order_float_matvec_kernel<kType, true>, blocks, dim3(kInt8Threads), 0,
                   stream, w, a.row_bytes, a.n_rows, a.x, a.n_cols, a.n_tokens, a.y);
  } else {
    launch_chained(cpu_order_float_matvec_kernel<kType, false>, blocks, dim3(kInt8Threads), 0,
                   stream, w, a.row_bytes, a.n_rows, a.x, a.n_cols, a.n_tokens, a.y);
  }
  return launched("cpu-order float matvec", error);
}

// ---- prefill: tiled matrix-matrix on tensor cores ----------------------------------------

constexpr int kTileRows = 128;   // weight rows per block (M)
constexpr int kTileTokens = 64;  // tokens per block (N)
constexpr int kTileCols = 64;    // columns per step (K)
constexpr int kTilePad = 8;      // halves of padding per shared row (bank spread)
constexpr int kGemmThreads = 256;
constexpr int kTileLd = kTileCols + kTilePad;
constexpr int kOutLd = kTileRows + 4;

struct GemmTiles {
  __half w[kTileRows][kTileLd];    // decoded weights, row-major (M x K)
  __half x[kTileTokens][kTileLd];  // activations: x[n][k], i.e. K x N column-major
};
union GemmShared {
  GemmTiles tiles;
  float out[kTileTokens][kOutLd];  // results y[n][m] (M x N column-major)
};

// The block's tile: rows m0 .. m0 + 127 of w times tokens n0 .. n0 + 63 of x. Shared by
// matmul_kernel and the experts' grouped kernel (quant_expert_kernels.cuh).
template <QType kType>
__device__ __forceinline__ void matmul_tile(const uint8_t* __restrict__ w, int64_t row_bytes,
                                            int64_t n_rows, int64_t n_cols,
                                            const float* __restrict__ x, int64_t n_tokens,
                                            float* __restrict__ y, int64_t m0, int64_t n0) {
  namespace wmma = nvcuda::wmma;
  __shared__ __align__(32) GemmShared shared;
  const int warp = threadIdx.x / 32;
  const int wm = warp % 4, wn = warp / 4;  // this warp's 32 x 32 piece of the 128 x 64 tile
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  for (int64_t k0 = 0; k0 < n_cols; k0 += kTileCols) {
    // Weights: 128 rows x 8 groups, 4 groups per thread.
    for (int i = threadIdx.x; i < kTileRows * (kTileCols / 8); i += kGemmThreads) {
      const int r = i / (kTileCols / 8), cg = i % (kTileCols / 8);
      const int64_t col = k0 + 8 * cg;
      float v[8] = {};
      if (m0 + r < n_rows && col < n_cols) {
        decode_group<kType, false>(w + (m0 + r) * row_bytes, int(col / 8), v);
      }
      __align__(16) __half2 h[4];
      for (int j = 0; j < 4; ++j) h[j] = __floats2half2_rn(v[2 * j], v[2 * j + 1]);
      *reinterpret_cast<uint4*>(&shared.tiles.w[r][8 * cg]) = *reinterpret_cast<uint4*>(h);
    }
    // Activations: 64 tokens x 16 float4, 4 per thread.
    for (int i = threadIdx.x; i < kTileTokens * (kTileCols / 4); i += kGemmThreads) {
      const int n = i / (kTileCols / 4), c4 = i % (kTileCols / 4);
      const int64_t col = k0 + 4 * c4;
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (n0 + n < n_tokens && col < n_cols) {
        v = __ldg(reinterpret_cast<const float4*>(x + (n0 + n) * n_cols + col));
      }
      __align__(8) __half2 h[2] = {__floats2half2_rn(v.x, v.y), __floats2half2_rn(v.z, v.w)};
      *reinterpret_cast<uint2*>(&shared.tiles.x[n][4 * c4]) = *reinterpret_cast<uint2*>(h);
    }
    __syncthreads();
    for (int kk = 0; kk < kTileCols; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb[2];
      for (int i = 0; i < 2; ++i) {
        wmma::load_matrix_sync(fa[i], &shared.tiles.w[32 * wm + 16 * i][kk], kTileLd);
      }
      for (int j = 0; j < 2; ++j) {
        wmma::load_matrix_sync(fb[j], &shared.tiles.x[32 * wn + 16 * j][kk], kTileLd);
      }
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      wmma::store_matrix_sync(&shared.out[32 * wn + 16 * j][32 * wm + 16 * i], acc[i][j], kOutLd,
                              wmma::mem_col_major);
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kTileRows * kTileTokens; i += kGemmThreads) {
    const int n = i / kTileRows, m = i % kTileRows;
    if (m0 + m < n_rows && n0 + n < n_tokens) y[(n0 + n) * n_rows + m0 + m] = shared.out[n][m];
  }
}

template <QType kType>
__global__ void __launch_bounds__(kGemmThreads)
    matmul_kernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t n_rows, int64_t n_cols,
                  const float* __restrict__ x, int64_t n_tokens, float* __restrict__ y) {
  matmul_tile<kType>(w, row_bytes, n_rows, n_cols, x, n_tokens, y, int64_t(blockIdx.x) * kTileRows,
                     int64_t(blockIdx.y) * kTileTokens);
}

template <QType kType>
bool launch_matmul_tiled(const MatmulArgs& a, std::string* error) {
  const dim3 grid(unsigned((a.n_rows + kTileRows - 1) / kTileRows),
                  unsigned((a.n_tokens + kTileTokens - 1) / kTileTokens));
  if (grid.y > 65535) {
    if (error) *error = "cuda matmul: too many tokens in one call";
    return false;
  }
  matmul_kernel<kType><<<grid, kGemmThreads, 0, static_cast<cudaStream_t>(a.stream)>>>(
      static_cast<const uint8_t*>(a.w), a.row_bytes, a.n_rows, a.n_cols, a.x, a.n_tokens, a.y);
  return launched("matmul", error);
}

template <QType kType>
bool run_matmul(const MatmulArgs& a, std::string* error) {
  if constexpr (uses_tables(kType)) {
    if (!ensure_tables(error)) return false;
  }
  if constexpr (has_int8_matvec(kType)) {
    if (a.n_tokens <= 8) return run_int8_matvec<kType>(a, error);
  } else {
    if (a.cpu_order != CpuOrder::kNone && a.n_tokens <= 8)
      return launch_cpu_order_float<kType>(a, error);
  }
  switch (a.n_tokens) {
    case 1:
      return launch_matvec<kType, 1>(a, error);
    case 2:
      return launch_matvec<kType, 2>(a, error);
    case 3:
      return launch_matvec<kType, 3>(a, error);
    case 4:
      return launch_matvec<kType, 4>(a, error);
    case 5:
      return launch_matvec<kType, 5>(a, error);
    case 6:
      return launch_matvec<kType, 6>(a, error);
    case 7:
      return launch_matvec<kType, 7>(a, error);
    case 8:
      return launch_matvec<kType, 8>(a, error);
    default:
      return launch_matmul_tiled<kType>(a, error);
  }
}

// ---- get_rows ----------------------------------------------------------------------------

template <QType kType>
__global__ void get_rows_kernel(const uint8_t* __restrict__ table, int64_t row_bytes, int n_groups,
                                const int32_t* __restrict__ ids, int64_t n,
                                float* __restrict__ out) {
  for (int64_t i = blockIdx.y; i < n; i += gridDim.y) {
    const uint8_t* row = table + int64_t(ids[i]) * row_bytes;
    float* dst = out + i * int64_t(n_groups) * 8;
    for (int group = blockIdx.x * blockDim.x + threadIdx.x; group < n_groups;
         group += gridDim.x * blockDim.x) {
      float v[8];
      decode_group<kType, true>(row, group, v);
      float4* d4 = reinterpret_cast<float4*>(dst + 8 * int64_t(group));
      d4[0] = make_float4(v[0], v[1], v[2], v[3]);
      d4[1] = make_float4(v[4], v[5], v[6], v[7]);
    }
  }
}

template <QType kType>
bool run_get_rows(const GetRowsArgs& a, std::string* error) {
  if constexpr (uses_tables(kType)) {
    if (!ensure_tables(error)) return false;
  }
  if (a.n == 0) return true;
  const int n_groups = int(a.n_cols / 8);
  constexpr int kThreads = 128;
  const int blocks_x = (n_groups + kThreads - 1) / kThreads;
  const unsigned blocks_y = unsigned(a.n < 65535 ? a.n : 65535);  // the kernel strides over ids
  get_rows_kernel<kType>
      <<<dim3(unsigned(blocks_x), blocks_y), kThreads, 0, static_cast<cudaStream_t>(a.stream)>>>(
          static_cast<const uint8_t*>(a.table), a.row_bytes, n_groups, a.ids, a.n, a.out);
  return launched("get_rows", error);
}

// ---- rows dequantized to f16 (prefill through cuBLAS) --------------------------------------

template <QType kType>
__global__ void dequantize_half_kernel(const uint8_t* __restrict__ w, int64_t row_bytes,
                                       int n_groups, __half* __restrict__ out) {
  const int64_t r = blockIdx.y;
  const uint8_t* row = w + r * row_bytes;
  __half* dst = out + r * int64_t(n_groups) * 8;
  for (int group = blockIdx.x * blockDim.x + threadIdx.x; group < n_groups;
       group += gridDim.x * blockDim.x) {
    float v[8];
    decode_group<kType, false>(row, group, v);  // the values the tile path rounds to f16
    __align__(16) __half2 h[4];
    for (int j = 0; j < 4; ++j) h[j] = __floats2half2_rn(v[2 * j], v[2 * j + 1]);
    *reinterpret_cast<uint4*>(dst + 8 * int64_t(group)) = *reinterpret_cast<uint4*>(h);
  }
}

template <QType kType>
bool run_dequantize_half(const DequantizeArgs& a, std::string* error) {
  if constexpr (uses_tables(kType)) {
    if (!ensure_tables(error)) return false;
  }
  if (a.n_rows <= 0) return true;
  if (a.n_rows > 65535) {
    if (error) *error = "cuda dequantize: more than 65535 rows in one call";
    return false;
  }
  const int n_groups = int(a.n_cols / 8);
  constexpr int kThreads = 128;
  const int blocks_x = (n_groups + kThreads - 1) / kThreads;
  dequantize_half_kernel<kType><<<dim3(unsigned(blocks_x), unsigned(a.n_rows)), kThreads, 0,
                                  static_cast<cudaStream_t>(a.stream)>>>(
      static_cast<const uint8_t*>(a.w), a.row_bytes, n_groups, static_cast<__half*>(a.out));
  return launched("dequantize to f16", error);
}

// matmul_quantized_many: the int8 products of several matrices in one launch.
template <QType kType>
bool run_matmul_many(const SharedInputArgs& a, std::string* error) {
  if constexpr (uses_tables(kType)) {
    if (!ensure_tables(error)) return false;
  }
  return run_int8_products<kType>(a, error);
}

template <QType kType>
constexpr KernelSet kernel_set_of() {
  if constexpr (has_int8_matvec(kType)) {
    return KernelSet{&run_matmul<kType>,          &quantize_int8_activations<kType>,
                     activation_block(kType),     &run_get_rows<kType>,
                     BlockDecoder<kType>::kElems, BlockDecoder<kType>::kAlign,
                     &run_matmul_many<kType>,     &run_dequantize_half<kType>};
  } else {
    return KernelSet{&run_matmul<kType>,
                     nullptr,
                     0,
                     &run_get_rows<kType>,
                     BlockDecoder<kType>::kElems,
                     BlockDecoder<kType>::kAlign,
                     nullptr,
                     &run_dequantize_half<kType>};
  }
}

// kernel_set_of as a TypeFamily maker (quant_kernel_set.h).
struct MakeKernelSet {
  using Set = KernelSet;
  template <QType kType>
  static constexpr KernelSet of() {
    return kernel_set_of<kType>();
  }
};

}  // namespace
}  // namespace sluice::cuda::quant
