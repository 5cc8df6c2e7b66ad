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

// A thread's elements of a row, i = threadIdx.x + k * blockDim.x, are visited kRowBatch at a
// time: the batch's loads first, then its arithmetic and stores in the same order as one element
// at a time. Element by element, each load waited for the store before it (the row may be
// written in place), one memory round trip per element: a 2048-float add + norm took 9 µs.
constexpr int kRowBatch = 8;

// The double sum of squares (each rounded to float) of this thread's elements of `in`.
__device__ __forceinline__ double sum_squares(const float* in, int64_t n) {
  double local = 0.0;
  for (int64_t base = threadIdx.x; base < n; base += kRowBatch * int64_t(blockDim.x)) {
    float v[kRowBatch];
#pragma unroll
    for (int k = 0; k < kRowBatch; ++k) {
      const int64_t i = base + k * int64_t(blockDim.x);
      v[k] = i < n ? in[i] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kRowBatch; ++k) {
      if (base + k * int64_t(blockDim.x) < n) local += double(__fmul_rn(v[k], v[k]));
    }
  }
  return local;
}

// The double sum of squares of elements 8t .. 8t + 7 of `in` for thread t, in that order (n a
// multiple of 8): the share of a row register_norm_kernel (cuda_norm.cu) gives each thread, so a
// norm of the same row elsewhere (attention_inputs) reduces the same partial sums.
__device__ __forceinline__ double sum_squares_by_eights(const float* in, int64_t n) {
  double local = 0.0;
  const int64_t first = 8 * int64_t(threadIdx.x);
  if (first < n) {
#pragma unroll
    for (int j = 0; j < 8; ++j) local += double(__fmul_rn(in[first + j], in[first + j]));
  }
  return local;
}

// out[i] = (in[i] * factor) * weight[i] for this thread's elements (out may be in).
__device__ __forceinline__ void scale_row(const float* in, float factor, const float* weight,
                                          float* out, int64_t n) {
  for (int64_t base = threadIdx.x; base < n; base += kRowBatch * int64_t(blockDim.x)) {
    float v[kRowBatch], w[kRowBatch];
#pragma unroll
    for (int k = 0; k < kRowBatch; ++k) {
      const int64_t i = base + k * int64_t(blockDim.x);
      v[k] = i < n ? in[i] : 0.0f;
      w[k] = i < n && weight != nullptr ? weight[i] : 1.0f;
    }
#pragma unroll
    for (int k = 0; k < kRowBatch; ++k) {
      const int64_t i = base + k * int64_t(blockDim.x);
      if (i >= n) break;
      const float scaled = __fmul_rn(v[k], factor);
      out[i] = weight != nullptr ? __fmul_rn(scaled, w[k]) : scaled;
    }
  }
}

}  // namespace sluice::cuda
