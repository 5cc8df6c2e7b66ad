// expert_matmul.h's add_expert_bias: the per-expert bias rows (gpt-oss's ffn_*_exps.bias) added
// to the stacked expert products' rows, each row's expert read from device ids, so a decode step
// whose choice stays on the device needs no host list. One launch for all rows; each element is
// add_bias' one rounded float addition.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "backend/cuda/expert_matmul.h"

namespace sluice::cuda {
namespace {

constexpr int kThreads = 256;

// Grid: (column blocks, row blocks), rows strided by gridDim.y. A row whose id is out of range
// is left alone (never read past the table).
__global__ void add_expert_bias_kernel(float* __restrict__ x, const float* __restrict__ table,
                                       int64_t n_expert, const int32_t* __restrict__ ids, int64_t n,
                                       int64_t n_cols) {
  for (int64_t r = blockIdx.y; r < n; r += gridDim.y) {
    const int32_t id = ids[r];
    if (id < 0 || id >= n_expert) continue;
    const float* bias = table + int64_t(id) * n_cols;
    float* row = x + r * n_cols;
    for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < n_cols;
         c += int64_t(gridDim.x) * blockDim.x) {
      row[c] = __fadd_rn(row[c], bias[c]);
    }
  }
}

bool fail(std::string* error, const std::string& message) {
  if (error) *error = message;
  return false;
}

}  // namespace

bool add_expert_bias(float* x, const float* table, int64_t n_expert, const int32_t* ids, int64_t n,
                     int64_t n_cols, void* stream, std::string* error) {
  if (n < 0 || n_cols < 0 || n_expert < 0) {
    return fail(error, "cuda add_expert_bias: " + std::to_string(n) + " rows of " +
                           std::to_string(n_cols) + ", " + std::to_string(n_expert) + " experts");
  }
  if (n == 0 || n_cols == 0) return true;
  if (!x || !table || !ids) return fail(error, "cuda add_expert_bias: x, table or ids missing");
  const int64_t column_blocks = (n_cols + kThreads - 1) / kThreads;
  const dim3 grid(unsigned(column_blocks < 64 ? column_blocks : 64),
                  unsigned(n < 65535 ? n : 65535));
  add_expert_bias_kernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      x, table, n_expert, ids, n, n_cols);
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) {
    return fail(error, std::string("cuda add_expert_bias: ") + cudaGetErrorString(status));
  }
  return true;
}

}  // namespace sluice::cuda
