// RMS norm on the device, in CpuBackend's arithmetic: squares rounded to float and summed in
// double (here by a block reduction instead of left to right: the double sum differs only far
// below float precision), mean and 1 / sqrt(mean + eps) in float, then (x * factor) * weight.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_math.cuh"
#include "backend/cuda/cuda_ops.h"

namespace sluice::cuda {
namespace {

constexpr int kThreads = 256;

// One block per row. In place is safe: every x is read before the reduction's barriers and
// each y[i] is written by the thread that read x[i].
__global__ void rms_norm_kernel(const float* x, const float* weight, float* y, int64_t n,
                                float eps) {
  __shared__ double scratch[32];
  const float* in = x + int64_t(blockIdx.x) * n;
  float* out = y + int64_t(blockIdx.x) * n;
  double local = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) local += double(__fmul_rn(in[i], in[i]));
  const double sum = block_sum(local, scratch);
  const float mean = __double2float_rn(sum / double(n));
  const float factor = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, eps)));
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float scaled = __fmul_rn(in[i], factor);
    out[i] = weight != nullptr ? __fmul_rn(scaled, weight[i]) : scaled;
  }
}

}  // namespace

void launch_rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n,
                     float eps, cudaStream_t stream) {
  if (n_rows <= 0) return;
  if (n <= 0) fail("rms_norm: rows of ", n, " elements");
  if (n_rows > int64_t(0x7fffffff)) fail("rms_norm: ", n_rows, " rows are too many");
  rms_norm_kernel<<<unsigned(n_rows), kThreads, 0, stream>>>(x, weight, y, n, eps);
  check_launch("rms_norm kernel");
}

}  // namespace sluice::cuda
