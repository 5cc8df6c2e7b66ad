// Internal to backend/cuda: device-side float helpers that reproduce the CPU reference's
// arithmetic. Every step is written with an explicit rounding intrinsic (__fmul_rn, __fmaf_rn …)
// because nvcc otherwise contracts a * b + c into fused multiply-adds where the CPU code (built
// with -ffp-contract=off) rounds twice. libm functions are evaluated in double and rounded once,
// which gives the correctly rounded float: glibc's expf/tanhf/cosf are within ~0.5 ulp of it, so
// results agree with the CPU except on rare near-tie inputs (1 ulp there).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace sluice::cuda {

// cpu::exp_polynomial (ggml_v_expf, one lane of the 8-lane algorithm), bit for bit.
__device__ __forceinline__ float exp_polynomial(float x) {
  const float shift = 0x1.8p23f;
  const float z = __fmaf_rn(x, 0x1.715476p+0f, shift);
  const float n = __fsub_rn(z, shift);
  const float b = __fmaf_rn(-n, 0x1.7f7d1cp-20f, __fmaf_rn(-n, 0x1.62e4p-1f, x));
  const uint32_t e = __float_as_uint(z) << 23;
  const float k = __uint_as_float(e + __float_as_uint(1.0f));  // 2^n
  const float u = __fmul_rn(b, b);
  const float j = __fmaf_rn(__fmaf_rn(__fmaf_rn(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                                      __fmaf_rn(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                            u, __fmul_rn(0x1.ffffecp-1f, b));
  if (!(fabsf(n) > 126.0f)) return __fmaf_rn(j, k, k);
  const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
  const float s1 = __uint_as_float(g + 0x7f000000u);
  const float s2 = __uint_as_float(e - g);
  if (fabsf(n) > 192.0f) return __fmul_rn(s1, s1);
  return __fmul_rn(__fmaf_rn(s2, j, s2), s1);
}

// libm's expf / tanhf / cosf / sinf as the host computes them (see the file comment).
__device__ __forceinline__ float libm_expf(float x) {
  return __double2float_rn(exp(double(x)));
}
__device__ __forceinline__ float libm_tanhf(float x) {
  return __double2float_rn(tanh(double(x)));
}
__device__ __forceinline__ float libm_cosf(float x) {
  return __double2float_rn(cos(double(x)));
}
__device__ __forceinline__ float libm_sinf(float x) {
  return __double2float_rn(sin(double(x)));
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ double warp_sum(double v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sum of `v` over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
// `scratch` holds 32 doubles of shared memory. Starts and ends with a barrier.
__device__ __forceinline__ double block_sum(double v, double* scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int n_warps = blockDim.x / 32;
  __syncthreads();
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < n_warps; ++w) total += scratch[w];  // same order in every thread
  __syncthreads();
  return total;
}

// Maximum of `v` over the block (fmaxf: NaN-ignoring, as std::fmax); as block_sum.
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int n_warps = blockDim.x / 32;
  __syncthreads();
  v = warp_max(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = scratch[0];
  for (int w = 1; w < n_warps; ++w) total = fmaxf(total, scratch[w]);
  __syncthreads();
  return total;
}

// Blocks of a 1-D launch over n elements, capped (the kernels loop with a grid stride).
inline unsigned grid_for(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return unsigned(blocks < 65535 * 16 ? (blocks > 0 ? blocks : 1) : 65535 * 16);
}

}  // namespace sluice::cuda
