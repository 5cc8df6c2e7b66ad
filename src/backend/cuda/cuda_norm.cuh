// Internal to backend/cuda: the RMS norm's block reduction and scaling, shared by the norm
// kernels (cuda_norm.cu) and the fused attention-inputs kernel (cuda_attention_inputs.cu) so that
// every norm of a row gives the same bits: squares rounded to float and summed in double over the
// block, mean and 1 / sqrt(mean + eps) in float, then (x * factor) * weight.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_math.cuh"

namespace sluice::cuda {

// 1 / sqrt(mean + eps) of a row from each thread's double sum of its squares; every thread of
// the block gets it. Every norm kernel reduces here with the same threads, so their sums agree.
__device__ __forceinline__ float rms_factor(double local, int64_t n, float eps, double* scratch) {
  const double sum = block_sum(local, scratch);
  const float mean = __double2float_rn(sum / double(n));
  return __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, eps)));
}

// out[i] = (in[i] * factor) * weight[i] for this thread's elements.
__device__ __forceinline__ void scale_row(const float* in, float factor, const float* weight,
                                          float* out, int64_t n) {
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float scaled = __fmul_rn(in[i], factor);
    out[i] = weight != nullptr ? __fmul_rn(scaled, weight[i]) : scaled;
  }
}

}  // namespace sluice::cuda
