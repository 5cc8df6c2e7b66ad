// RMS norm on the device, in CpuBackend's arithmetic: squares rounded to float and summed in
// double (here by a block reduction instead of left to right: the double sum differs only far
// below float precision), mean and 1 / sqrt(mean + eps) in float, then (x * factor) * weight.
// add_rms_norm fuses the residual add before it (x += branch, as add_kernel: one rounded float
// addition per element) into the same block, so it gives the bits of add then rms_norm.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_math.cuh"
#include "backend/cuda/cuda_ops.h"

namespace sluice::cuda {
namespace {

constexpr int kThreads = 256;

// 1 / sqrt(mean + eps) of a row from each thread's double sum of its squares; every thread of
// the block gets it. Both kernels reduce here with the same threads, so their sums agree.
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

// One block per row. In place is safe: every x is read before the reduction's barriers and
// each y[i] is written by the thread that read x[i].
__global__ void rms_norm_kernel(const float* x, const float* weight, float* y, int64_t n,
                                float eps) {
  __shared__ double scratch[32];
  const float* in = x + int64_t(blockIdx.x) * n;
  double local = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) local += double(__fmul_rn(in[i], in[i]));
  const float factor = rms_factor(local, n, eps, scratch);
  scale_row(in, factor, weight, y + int64_t(blockIdx.x) * n, n);
}

// One block per row: x[i] += branch[i], then the norm of the sums into xn. Each thread reads
// back only the sums it wrote, and writes xn[i] only after reading branch[i] (xn may be branch).
__global__ void add_rms_norm_kernel(float* x, const float* branch, const float* weight, float* xn,
                                    int64_t n, float eps) {
  __shared__ double scratch[32];
  float* row = x + int64_t(blockIdx.x) * n;
  const float* add = branch + int64_t(blockIdx.x) * n;
  double local = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float sum = __fadd_rn(row[i], add[i]);
    row[i] = sum;
    local += double(__fmul_rn(sum, sum));
  }
  const float factor = rms_factor(local, n, eps, scratch);
  scale_row(row, factor, weight, xn + int64_t(blockIdx.x) * n, n);
}

void check_rows(const char* op, int64_t n_rows, int64_t n) {
  if (n <= 0) fail(op, ": rows of ", n, " elements");
  if (n_rows > int64_t(0x7fffffff)) fail(op, ": ", n_rows, " rows are too many");
}

}  // namespace

void launch_rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n,
                     float eps, cudaStream_t stream) {
  if (n_rows <= 0) return;
  check_rows("rms_norm", n_rows, n);
  rms_norm_kernel<<<unsigned(n_rows), kThreads, 0, stream>>>(x, weight, y, n, eps);
  check_launch("rms_norm kernel");
}

void launch_add_rms_norm(float* x, const float* branch, const float* weight, float* xn,
                         int64_t n_rows, int64_t n, float eps, cudaStream_t stream) {
  if (n_rows <= 0) return;
  check_rows("add_rms_norm", n_rows, n);
  if (x == xn) fail("add_rms_norm: the norm's output must not be x");
  add_rms_norm_kernel<<<unsigned(n_rows), kThreads, 0, stream>>>(x, branch, weight, xn, n, eps);
  check_launch("add_rms_norm kernel");
}

}  // namespace sluice::cuda
