// RMS norm on the device, in CpuBackend's arithmetic: squares rounded to float and summed in
// double (here by a block reduction instead of left to right: the double sum differs only far
// below float precision), mean and 1 / sqrt(mean + eps) in float, then (x * factor) * weight.
// add_rms_norm fuses the residual add before it (x += branch, as add_kernel: one rounded float
// addition per element) into the same block, so it gives the bits of add then rms_norm.
// post_norm_add_rms_norm puts the sandwich block's post-norm of the branch in front of that, in
// the same block and through the same reduction: the bits of rms_norm, add, rms_norm.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_math.cuh"
#include "backend/cuda/cuda_norm.cuh"
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
  const float factor = rms_factor(sum_squares(in, n), n, eps, scratch);
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
  for (int64_t base = threadIdx.x; base < n; base += kRowBatch * int64_t(blockDim.x)) {
    float a[kRowBatch], b[kRowBatch];  // batched loads (cuda_norm.cuh)
#pragma unroll
    for (int k = 0; k < kRowBatch; ++k) {
      const int64_t i = base + k * int64_t(blockDim.x);
      a[k] = i < n ? row[i] : 0.0f;
      b[k] = i < n ? add[i] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kRowBatch; ++k) {
      const int64_t i = base + k * int64_t(blockDim.x);
      if (i >= n) break;
      const float sum = __fadd_rn(a[k], b[k]);
      row[i] = sum;
      local += double(__fmul_rn(sum, sum));
    }
  }
  const float factor = rms_factor(local, n, eps, scratch);
  scale_row(row, factor, weight, xn + int64_t(blockIdx.x) * n, n);
}

// One block per row: branch = rms_norm(branch) * post_weight in place, x[i] += branch[i], then
// (xn not nullptr) the norm of the sums into xn — rms_norm_kernel, add_kernel, rms_norm_kernel
// element for element, both reductions over the same threads as rms_norm_kernel's. Each thread
// touches only its own elements after the first reduction's barriers, so branch[i] is read
// before it is overwritten and xn[i] (which may be branch[i]) is written last.
__global__ void post_norm_add_rms_norm_kernel(float* x, float* branch, const float* post_weight,
                                              float post_eps, const float* weight, float* xn,
                                              int64_t n, float eps) {
  __shared__ double scratch[32];
  float* row = x + int64_t(blockIdx.x) * n;
  float* add = branch + int64_t(blockIdx.x) * n;
  const float post_factor = rms_factor(sum_squares(add, n), n, post_eps, scratch);
  double local = 0.0;
  for (int64_t base = threadIdx.x; base < n; base += kRowBatch * int64_t(blockDim.x)) {
    float a[kRowBatch], b[kRowBatch], w[kRowBatch];  // batched loads (cuda_norm.cuh)
#pragma unroll
    for (int k = 0; k < kRowBatch; ++k) {
      const int64_t i = base + k * int64_t(blockDim.x);
      a[k] = i < n ? row[i] : 0.0f;
      b[k] = i < n ? add[i] : 0.0f;
      w[k] = i < n && post_weight != nullptr ? post_weight[i] : 1.0f;
    }
#pragma unroll
    for (int k = 0; k < kRowBatch; ++k) {
      const int64_t i = base + k * int64_t(blockDim.x);
      if (i >= n) break;
      const float scaled = __fmul_rn(b[k], post_factor);
      const float normed = post_weight != nullptr ? __fmul_rn(scaled, w[k]) : scaled;
      add[i] = normed;
      const float sum = __fadd_rn(a[k], normed);
      row[i] = sum;
      local += double(__fmul_rn(sum, sum));
    }
  }
  if (xn == nullptr) return;  // the same for every thread of the grid
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

void launch_post_norm_add_rms_norm(float* x, float* branch, const float* post_weight,
                                   float post_eps, const float* weight, float* xn, int64_t n_rows,
                                   int64_t n, float eps, cudaStream_t stream) {
  if (n_rows <= 0) return;
  check_rows("post_norm_add_rms_norm", n_rows, n);
  if (x == xn) fail("post_norm_add_rms_norm: the norm's output must not be x");
  if (x == branch) fail("post_norm_add_rms_norm: the branch must not be x");
  post_norm_add_rms_norm_kernel<<<unsigned(n_rows), kThreads, 0, stream>>>(
      x, branch, post_weight, post_eps, weight, xn, n, eps);
  check_launch("post_norm_add_rms_norm kernel");
}

}  // namespace sluice::cuda
