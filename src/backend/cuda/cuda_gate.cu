// Kernels of mul_gate and mul_rows. mul_gate gives each block whole logits of one row (about
// kThreads values: one logit's head, or many per-element logits), so that a decode token's row
// spreads over many blocks: every thread first scales its values of x by the activation of their
// (raw) logit, recomputed where a logit serves a head's many values, and only after the block's
// barrier are the block's activated logits written back in place — so no thread ever reads a
// logit another has already overwritten, in one launch. The activation is the CPU's
// (cpu_gate_ops.cpp) with libm's exp / log evaluated as cuda_math.cuh does, so results agree with
// CpuBackend bit for bit but for libm's rare 1-ulp ties.
#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_gate.h"
#include "backend/cuda/cuda_math.cuh"

namespace sluice::cuda {
namespace {

constexpr int kThreads = 256;

// logf rounded once from the double result, as libm_expf (see cuda_math.cuh).
__device__ __forceinline__ float libm_logf(float x) {
  return __double2float_rn(log(double(x)));
}

template <GateActivation kAct>
__device__ __forceinline__ float activate(float g) {
  if constexpr (kAct == GateActivation::kSoftplus) {
    return g > 20.0f ? g : libm_logf(__fadd_rn(1.0f, libm_expf(g)));
  } else {
    return __fdiv_rn(1.0f, __fadd_rn(1.0f, libm_expf(-g)));
  }
}

// Block (r, b): row r's logits [b G, b G + G) and their values; G = logits_per_block.
template <GateActivation kAct>
__global__ void mul_gate_kernel(float* x, float* gate, int64_t n_cols, int64_t n_gate,
                                int64_t per_logit, int64_t logits_per_block) {
  const int64_t g0 = int64_t(blockIdx.y) * logits_per_block;
  const int64_t g1 = min(g0 + logits_per_block, n_gate);
  float* x_row = x + int64_t(blockIdx.x) * n_cols;
  float* gate_row = gate + int64_t(blockIdx.x) * n_gate;
  for (int64_t i = g0 * per_logit + threadIdx.x; i < g1 * per_logit; i += blockDim.x) {
    x_row[i] = __fmul_rn(x_row[i], activate<kAct>(gate_row[i / per_logit]));
  }
  __syncthreads();  // every raw logit of the block read before any is overwritten
  for (int64_t j = g0 + threadIdx.x; j < g1; j += blockDim.x) {
    gate_row[j] = activate<kAct>(gate_row[j]);
  }
}

__global__ void mul_rows_kernel(float* x, const float* weight, int64_t n, int64_t n_cols) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    x[i] = __fmul_rn(x[i], weight[i % n_cols]);
  }
}

}  // namespace

void launch_mul_gate(GateActivation act, float* x, float* gate, int64_t n_rows, int64_t n_cols,
                     int64_t n_gate, cudaStream_t stream) {
  if (n_gate <= 0 || n_cols % n_gate != 0) {
    fail("mul_gate: ", n_gate, " gate logits do not divide a row of ", n_cols);
  }
  if (n_rows > 0x7fffffff) fail("mul_gate: ", n_rows, " rows are too many");
  if (n_rows <= 0) return;
  const int64_t per_logit = n_cols / n_gate;
  const int64_t logits_per_block = std::max<int64_t>(1, kThreads / per_logit);
  const int64_t blocks_per_row = (n_gate + logits_per_block - 1) / logits_per_block;
  if (blocks_per_row > 65535) fail("mul_gate: ", n_gate, " logits per row are too many");
  const dim3 grid{unsigned(n_rows), unsigned(blocks_per_row)};
  if (act == GateActivation::kSoftplus) {
    mul_gate_kernel<GateActivation::kSoftplus>
        <<<grid, kThreads, 0, stream>>>(x, gate, n_cols, n_gate, per_logit, logits_per_block);
  } else {
    mul_gate_kernel<GateActivation::kSigmoid>
        <<<grid, kThreads, 0, stream>>>(x, gate, n_cols, n_gate, per_logit, logits_per_block);
  }
  check_launch("mul_gate kernel");
}

void launch_mul_rows(float* x, const float* weight, int64_t n_rows, int64_t n_cols,
                     cudaStream_t stream) {
  const int64_t n = n_rows * n_cols;
  if (n <= 0) return;
  mul_rows_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(x, weight, n, n_cols);
  check_launch("mul_rows kernel");
}

}  // namespace sluice::cuda
