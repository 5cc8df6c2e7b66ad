// Internal to backend/cuda: one row's softmax by one block, in cpu::softmax_row's operations —
// the maximum, e^(x - max) by the polynomial on groups of eight (each group's float sum formed as
// ggml's horizontal add, then added in double) and by libm on the tail, then x * float(1 / sum).
// Shared by softmax_rows_kernel (cuda_elementwise.cu) and select_experts' softmax scoring
// (cuda_expert_selection.cu): group g is thread g's (blockDim.x >= n / 8 in both), so both form
// the same partial sums and agree bit for bit. The double sum is formed in another order than the
// CPU's; rounded to float, 1 / sum agrees except on a near-tie.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_math.cuh"

namespace sluice::cuda {

// row [n] in place; every thread of the block calls it (barriers inside). scratch: 32 doubles
// of shared memory.
__device__ __forceinline__ void softmax_row_in_block(float* row, int64_t n, double* scratch) {
  float local_max = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) local_max = fmaxf(local_max, row[i]);
  const float max = block_max(local_max, reinterpret_cast<float*>(scratch));
  double local_sum = 0.0;
  const int64_t n_groups = n / 8;
  for (int64_t group = threadIdx.x; group < n_groups; group += blockDim.x) {
    float e[8];
    for (int j = 0; j < 8; ++j) {
      e[j] = exp_polynomial(__fsub_rn(row[8 * group + j], max));
      row[8 * group + j] = e[j];
    }
    const float a0 = __fadd_rn(e[0], e[4]), a1 = __fadd_rn(e[1], e[5]);
    const float a2 = __fadd_rn(e[2], e[6]), a3 = __fadd_rn(e[3], e[7]);
    local_sum += double(__fadd_rn(__fadd_rn(a0, a2), __fadd_rn(a1, a3)));
  }
  for (int64_t i = 8 * n_groups + threadIdx.x; i < n; i += blockDim.x) {
    row[i] = libm_expf(__fsub_rn(row[i], max));
    local_sum += double(row[i]);
  }
  const double sum = block_sum(local_sum, scratch);
  const float inv = __double2float_rn(1.0 / sum);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) row[i] = __fmul_rn(row[i], inv);
}

}  // namespace sluice::cuda
