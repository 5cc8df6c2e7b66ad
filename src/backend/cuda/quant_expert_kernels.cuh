// The routed experts' products over a stack of same-shaped matrices (matrix i at base + i *
// stride), written once over the kernel bodies of quant_kernels.cuh / quant_int8_matvec.cuh and
// instantiated per type family by the expert_kernels_*.cu files.
//
// By id (decode): one launch for all n choices, grid.y = choice; each block runs the body of
// matmul's one-token kernel on matrix ids[c] (the int8 matvec after one quantization of the 1 or
// n input rows, or the float matvec), so every output equals matmul() of that matrix bit for bit.
// Grouped (prefill): one launch, grid.z = group; each block runs the tensor-core tile of
// matmul_kernel on its group's rows (blocks past the group's last row leave at once).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "backend/cuda/quant_kernel_set.h"
#include "backend/cuda/quant_kernels.cuh"

namespace sluice::cuda::quant {
namespace {

// ---- by id: float types -----------------------------------------------------------------

constexpr int kByIdFloatRows = matvec_rows_per_block(1);  // matmul's one-token block

// Choice c = blockIdx.y reads x + c * x_stride (x_stride 0: every choice reads row 0) and
// writes y + c * n_rows.
template <QType kType>
__global__ void __launch_bounds__(kMatvecThreads)
    matvec_by_id_kernel(const uint8_t* __restrict__ base, int64_t stride, int64_t row_bytes,
                        int64_t n_rows, int n_groups, const int32_t* __restrict__ ids,
                        const float* __restrict__ x, int64_t x_stride, int64_t n_cols,
                        float* __restrict__ y) {
  const int64_t c = blockIdx.y;
  matvec_rows<kType, 1, kByIdFloatRows>(base + int64_t(ids[c]) * stride, row_bytes, n_rows,
                                        n_groups, x + c * x_stride, n_cols, y + c * n_rows,
                                        int64_t(blockIdx.x) * kByIdFloatRows);
}

// ---- by id: int8 types ------------------------------------------------------------------

// Row `row` of quantized activations laid out for n rows (split_scratch): the view a one-row
// quantization of that row alone would give (each activation block is quantized on its own).
__device__ __forceinline__ QuantizedRows quantized_row(const QuantizedRows& q, int64_t row,
                                                       int64_t n_cols, int block) {
  QuantizedRows r;
  r.qs = q.qs + row * n_cols;
  r.d = q.d + row * (n_cols / block);
  r.bsums = q.bsums + row * (n_cols / 16);
  r.s = q.s + row * (n_cols / 32);  // Q8_1's s, stored over the same bytes as bsums
  return r;
}

// Warp per row as int8_matvec_kernel / staged32_matvec_kernel with one token; choice
// c = blockIdx.y reads quantized row c when per_choice_inputs, row 0 otherwise. kBlock:
// activation_block(kType) (a host function, so the launcher passes it).
template <QType kType, int kBlock>
__global__ void __launch_bounds__(kInt8Threads)
    int8_matvec_by_id_kernel(const uint8_t* __restrict__ base, int64_t stride, int64_t row_bytes,
                             int64_t n_rows, const int32_t* __restrict__ ids, QuantizedRows q,
                             bool per_choice_inputs, int64_t n_cols, float* __restrict__ y) {
  const int64_t row = int64_t(blockIdx.x) * kInt8RowsPerBlock + threadIdx.x / 32;
  if (row >= n_rows) return;  // whole warps leave: no block-wide barrier below
  const int64_t c = blockIdx.y;
  wait_for_prerequisite();  // the quantized activations (ids come from earlier, finished work)
  const uint8_t* row_ptr = base + int64_t(ids[c]) * stride + row * row_bytes;
  const QuantizedRows qc = per_choice_inputs ? quantized_row(q, c, n_cols, kBlock) : q;
  float* yc = y + c * n_rows + row;
  if constexpr (kBlock == 32) {
    staged32_matvec_row<kType, 1>(row_ptr, qc, n_cols, yc, n_rows);
  } else {
    int8_matvec_row<kType, 1>(row_ptr, qc, n_cols, yc, n_rows);
  }
}

template <QType kType>
bool run_int8_by_id(const ExpertMatmulArgs& a, std::string* error) {
  constexpr int kBlock = activation_block(kType);
  void* scratch = const_cast<void*>(a.xq);
  const MatmulArgs rows{nullptr, 0, a.n_cols, 0, a.x, nullptr, a.n_inputs, a.stream};
  if (!scratch && (!activation_scratch(a.stream, scratch_bytes(a.n_inputs, a.n_cols, kBlock),
                                       &scratch, error) ||
                   !quantize_int8_activations<kType>(rows, scratch, error))) {
    return false;
  }
  const QuantizedRows q = split_scratch(scratch, a.n_inputs, a.n_cols, kBlock);
  const dim3 grid(unsigned((a.n_rows + kInt8RowsPerBlock - 1) / kInt8RowsPerBlock), unsigned(a.n));
  return launch_after_quantize(int8_matvec_by_id_kernel<kType, kBlock>, grid,
                               static_cast<cudaStream_t>(a.stream), error,
                               static_cast<const uint8_t*>(a.base), a.stride, a.row_bytes, a.n_rows,
                               a.ids, q, a.n_inputs > 1, a.n_cols, a.y);
}

template <QType kType>
bool run_matmul_by_id(const ExpertMatmulArgs& a, std::string* error) {
  if constexpr (uses_tables(kType)) {
    if (!ensure_tables(error)) return false;
  }
  if constexpr (has_int8_matvec(kType)) {
    return run_int8_by_id<kType>(a, error);
  } else {
    const dim3 grid(unsigned((a.n_rows + kByIdFloatRows - 1) / kByIdFloatRows), unsigned(a.n));
    matvec_by_id_kernel<kType><<<grid, kMatvecThreads, 0, static_cast<cudaStream_t>(a.stream)>>>(
        static_cast<const uint8_t*>(a.base), a.stride, a.row_bytes, a.n_rows, int(a.n_cols / 8),
        a.ids, a.x, a.n_inputs > 1 ? a.n_cols : 0, a.n_cols, a.y);
    return launched("matmul by id", error);
  }
}

// ---- grouped: tensor-core tiles per group ------------------------------------------------

// Group g = blockIdx.z: rows offsets[g] .. offsets[g + 1] of x and y, matrix ids[g].
template <QType kType>
__global__ void __launch_bounds__(kGemmThreads)
    grouped_matmul_kernel(const uint8_t* __restrict__ base, int64_t stride, int64_t row_bytes,
                          int64_t n_rows, int64_t n_cols, const int32_t* __restrict__ ids,
                          const int32_t* __restrict__ offsets, const float* __restrict__ x,
                          float* __restrict__ y) {
  const int g = blockIdx.z;
  const int64_t begin = offsets[g], end = offsets[g + 1];
  const int64_t n0 = int64_t(blockIdx.y) * kTileTokens;
  if (begin + n0 >= end) return;  // the whole block: past this group's rows
  matmul_tile<kType>(base + int64_t(ids[g]) * stride, row_bytes, n_rows, n_cols, x + begin * n_cols,
                     end - begin, y + begin * n_rows, int64_t(blockIdx.x) * kTileRows, n0);
}

template <QType kType>
bool run_matmul_grouped(const ExpertMatmulArgs& a, std::string* error) {
  if constexpr (uses_tables(kType)) {
    if (!ensure_tables(error)) return false;
  }
  const dim3 grid(unsigned((a.n_rows + kTileRows - 1) / kTileRows),
                  unsigned((a.max_rows + kTileTokens - 1) / kTileTokens), unsigned(a.n));
  grouped_matmul_kernel<kType><<<grid, kGemmThreads, 0, static_cast<cudaStream_t>(a.stream)>>>(
      static_cast<const uint8_t*>(a.base), a.stride, a.row_bytes, a.n_rows, a.n_cols, a.ids,
      a.offsets, a.x, a.y);
  return launched("matmul grouped", error);
}

// The routed experts' kernels of a type, as a TypeFamily maker (quant_kernel_set.h).
struct MakeExpertKernelSet {
  using Set = ExpertKernelSet;
  template <QType kType>
  static constexpr ExpertKernelSet of() {
    return ExpertKernelSet{&run_matmul_by_id<kType>, &run_matmul_grouped<kType>};
  }
};

}  // namespace
}  // namespace sluice::cuda::quant
