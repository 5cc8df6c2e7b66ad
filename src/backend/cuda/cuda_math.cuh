// Internal to backend/cuda: device-side float helpers that reproduce the CPU reference's
// arithmetic. Every step is written with an explicit rounding intrinsic (__fmul_rn, __fmaf_rn …)
// because nvcc otherwise contracts a * b + c into fused multiply-adds where the CPU code (built
// with -ffp-contract=off) rounds twice. expf follows glibc's algorithm step for step;
// the other libm functions are evaluated in double and rounded once, which gives the correctly
// rounded float: glibc's tanhf/cosf/sinf are within ~0.5 ulp of it, so results agree with the
// CPU except on rare near-tie inputs (1 ulp there).
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

// 2^(i/32) for i < 32 as the nearest doubles, each less i << 47 so that adding k << 47 for
// k = 32·e + i puts e into the exponent (libm_expf below).
static __constant__ const uint64_t kExp2Table32[32] = {
    0x3ff0000000000000ull, 0x3fefd9b0d3158574ull, 0x3fefb5586cf9890full, 0x3fef9301d0125b51ull,
    0x3fef72b83c7d517bull, 0x3fef54873168b9aaull, 0x3fef387a6e756238ull, 0x3fef1e9df51fdee1ull,
    0x3fef06fe0a31b715ull, 0x3feef1a7373aa9cbull, 0x3feedea64c123422ull, 0x3feece086061892dull,
    0x3feebfdad5362a27ull, 0x3feeb42b569d4f82ull, 0x3feeab07dd485429ull, 0x3feea47eb03a5585ull,
    0x3feea09e667f3bcdull, 0x3fee9f75e8ec5f74ull, 0x3feea11473eb0187ull, 0x3feea589994cce13ull,
    0x3feeace5422aa0dbull, 0x3feeb737b0cdc5e5ull, 0x3feec49182a3f090ull, 0x3feed503b23e255dull,
    0x3feee89f995ad3adull, 0x3feeff76f2fb5e47ull, 0x3fef199bdd85529cull, 0x3fef3720dcef9069ull,
    0x3fef5818dcfba487ull, 0x3fef7c97337b9b5full, 0x3fefa4afa2a490daull, 0x3fefd0765b6e4540ull,
};

// glibc's expf (the same algorithm since 2.27, every x86-64 build), step for step: it is not
// correctly rounded — about 1 input in 13 000 of [-104, 89] rounds the other way from exp(double)
// — and the CPU backend's attention calls it per cell. x·32/ln2 = k + r in double (k rounded to
// the nearest integer by adding 1.5·2^52), exp(x) = 2^(k/32) · (1 + c2·r + (c1 + c0·r)·r²),
// rounded once to float. Where x is out of the float range: 0, the input (NaN, ±inf) or inf.
__device__ __forceinline__ float libm_expf(float x) {
  const uint32_t top = (__float_as_uint(x) >> 20) & 0x7ff;
  if (top >= ((__float_as_uint(88.0f) >> 20) & 0x7ff)) {
    if (__float_as_uint(x) == 0xff800000u) return 0.0f;
    if (top >= 0x7f8) return x + x;
    if (x > 0x1.62e42ep6f) return __uint_as_float(0x7f800000u);
    if (x < -0x1.9fe368p6f) return 0.0f;
  }
  const double inv_ln2_32 = 0x1.71547652b82fep+0 * 32;
  const double shift = 0x1.8p+52;
  const double c0 = 0x1.c6af84b912394p-5 / (32.0 * 32.0 * 32.0);
  const double c1 = 0x1.ebfce50fac4f3p-3 / (32.0 * 32.0);
  const double c2 = 0x1.62e42ff0c52d6p-1 / 32.0;
  const double z = __dmul_rn(inv_ln2_32, double(x));
  const double shifted = __dadd_rn(z, shift);
  const uint64_t k = uint64_t(__double_as_longlong(shifted));
  const double r = __dsub_rn(z, __dsub_rn(shifted, shift));
  const double s = __longlong_as_double(int64_t(kExp2Table32[k % 32] + (k << 47)));
  const double y = __fma_rn(__fma_rn(c0, r, c1), __dmul_rn(r, r), __fma_rn(c2, r, 1.0));
  return __double2float_rn(__dmul_rn(y, s));
}

// libm's tanhf / cosf / sinf as the host computes them (see the file comment).
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
