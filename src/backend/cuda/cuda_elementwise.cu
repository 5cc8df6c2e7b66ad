// Element-wise kernels of CudaBackend: the GLUs, mul_sigmoid, add, add_bias, scale, softcap and
// the row softmax, each in CpuBackend's order of float operations (see cuda_math.cuh): SwiGLU
// and softmax use the same polynomial exp on whole groups of eight and libm's exp on the rest,
// the f16 GELU reads the CPU's own table, softmax sums its groups as ggml's horizontal add does.
#include <cuda_fp16.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_glu.cuh"
#include "backend/cuda/cuda_math.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_softmax.cuh"

namespace sluice::cuda {
namespace {

constexpr int kThreads = 256;

// gate = act(gate) * up; `n_vector` leading columns of each row take the polynomial exp
// (cpu::swiglu_rows: groups of eight from each row's start).
template <GluActivation kAct>
__global__ void glu_kernel(float* gate, const float* up, int64_t n, int64_t n_cols,
                           int64_t n_vector, const uint16_t* table) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    gate[i] = glu_value<kAct>(gate[i], up[i], i % n_cols, n_vector, table);
  }
}

__global__ void mul_sigmoid_kernel(float* x, const float* gate, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    x[i] = __fmul_rn(x[i], __fdiv_rn(1.0f, __fadd_rn(1.0f, libm_expf(-gate[i]))));
  }
}

__global__ void add_kernel(float* y, const float* x, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    y[i] = __fadd_rn(y[i], x[i]);
  }
}

__global__ void add_bias_kernel(float* x, const float* bias, int64_t n, int64_t n_cols) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    x[i] = __fadd_rn(x[i], bias[i % n_cols]);
  }
}

__global__ void scale_kernel(float* x, float factor, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    x[i] = __fmul_rn(x[i], factor);
  }
}

__global__ void softcap_kernel(float* x, float cap, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    x[i] = __fmul_rn(cap, libm_tanhf(__fdiv_rn(x[i], cap)));
  }
}

// One block per row (cuda_softmax.cuh).
__global__ void softmax_rows_kernel(float* x, int64_t n_cols) {
  __shared__ double scratch[32];
  softmax_row_in_block(x + int64_t(blockIdx.x) * n_cols, n_cols, scratch);
}

}  // namespace

void launch_glu(GluActivation act, float* gate, const float* up, int64_t n_rows, int64_t n_cols,
                const uint16_t* gelu_f16_table, cudaStream_t stream) {
  const int64_t n = n_rows * n_cols;
  if (n <= 0) return;
  const unsigned grid = grid_for(n, kThreads);
  const int64_t n_vector = n_cols & ~int64_t(7);
  switch (act) {
    case GluActivation::kSilu:
      glu_kernel<GluActivation::kSilu>
          <<<grid, kThreads, 0, stream>>>(gate, up, n, n_cols, n_vector, gelu_f16_table);
      break;
    case GluActivation::kGeluTanh:
      glu_kernel<GluActivation::kGeluTanh>
          <<<grid, kThreads, 0, stream>>>(gate, up, n, n_cols, n_vector, gelu_f16_table);
      break;
    case GluActivation::kGeluTanhF16:
      if (gelu_f16_table == nullptr) fail("glu: the f16 GELU table is not on the device");
      glu_kernel<GluActivation::kGeluTanhF16>
          <<<grid, kThreads, 0, stream>>>(gate, up, n, n_cols, n_vector, gelu_f16_table);
      break;
    case GluActivation::kSwigluOai:
      glu_kernel<GluActivation::kSwigluOai>
          <<<grid, kThreads, 0, stream>>>(gate, up, n, n_cols, n_vector, gelu_f16_table);
      break;
  }
  check_launch("glu kernel");
}

void launch_mul_sigmoid(float* x, const float* gate, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  mul_sigmoid_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(x, gate, n);
  check_launch("mul_sigmoid kernel");
}

void launch_add(float* y, const float* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  add_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(y, x, n);
  check_launch("add kernel");
}

void launch_add_bias(float* x, const float* bias, int64_t n_rows, int64_t n_cols,
                     cudaStream_t stream) {
  const int64_t n = n_rows * n_cols;
  if (n <= 0) return;
  add_bias_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(x, bias, n, n_cols);
  check_launch("add_bias kernel");
}

void launch_scale(float* x, float factor, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  scale_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(x, factor, n);
  check_launch("scale kernel");
}

void launch_softcap(float* x, float cap, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  softcap_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(x, cap, n);
  check_launch("softcap kernel");
}

void launch_softmax_rows(float* x, int64_t n_rows, int64_t n_cols, cudaStream_t stream) {
  if (n_rows <= 0 || n_cols <= 0) return;
  if (n_rows > int64_t(0x7fffffff)) fail("softmax_rows: ", n_rows, " rows are too many");
  // Router rows are short (8..256 experts): one warp per 256 columns, up to 8.
  const int threads = int(std::clamp<int64_t>(((n_cols / 8 + 31) / 32) * 32, 32, 256));
  softmax_rows_kernel<<<unsigned(n_rows), threads, 0, stream>>>(x, n_cols);
  check_launch("softmax_rows kernel");
}

}  // namespace sluice::cuda
