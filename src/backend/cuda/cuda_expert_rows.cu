// expert_matmul.h's per-expert row ops on the stacked expert products' rows, each row's expert
// read from device ids, so a decode step whose choice stays on the device needs no host list:
// add_expert_bias (gpt-oss's ffn_*_exps.bias rows; each element add_bias' one rounded float
// addition) and scale_expert_rows (Gemma 4's ffn_down_exps.scale; scale's one multiplication).
// One launch for all rows.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "backend/cuda/expert_matmul.h"

namespace sluice::cuda {
namespace {

constexpr int kThreads = 256;

// Grid: (column blocks, row blocks), rows strided by gridDim.y. A row whose id is out of range
// is left alone (never read past the table). kScale: row *= table[id]; else row += table row id.
template <bool kScale>
__global__ void expert_rows_kernel(float* __restrict__ x, const float* __restrict__ table,
                                   int64_t n_expert, const int32_t* __restrict__ ids, int64_t n,
                                   int64_t n_cols) {
  for (int64_t r = blockIdx.y; r < n; r += gridDim.y) {
    const int32_t id = ids[r];
    if (id < 0 || id >= n_expert) continue;
    float* row = x + r * n_cols;
    for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < n_cols;
         c += int64_t(gridDim.x) * blockDim.x) {
      if constexpr (kScale) {
        row[c] = __fmul_rn(row[c], table[id]);
      } else {
        row[c] = __fadd_rn(row[c], table[int64_t(id) * n_cols + c]);
      }
    }
  }
}

bool fail(std::string* error, const std::string& message) {
  if (error) *error = message;
  return false;
}

template <bool kScale>
bool launch_expert_rows(const char* op, float* x, const float* table, int64_t n_expert,
                        const int32_t* ids, int64_t n, int64_t n_cols, void* stream,
                        std::string* error) {
  if (n < 0 || n_cols < 0 || n_expert < 0) {
    return fail(error, std::string("cuda ") + op + ": " + std::to_string(n) + " rows of " +
                           std::to_string(n_cols) + ", " + std::to_string(n_expert) + " experts");
  }
  if (n == 0 || n_cols == 0) return true;
  if (!x || !table || !ids)
    return fail(error, std::string("cuda ") + op + ": x, table or ids missing");
  const int64_t column_blocks = (n_cols + kThreads - 1) / kThreads;
  const dim3 grid(unsigned(column_blocks < 64 ? column_blocks : 64),
                  unsigned(n < 65535 ? n : 65535));
  expert_rows_kernel<kScale><<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      x, table, n_expert, ids, n, n_cols);
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) {
    return fail(error, std::string("cuda ") + op + ": " + cudaGetErrorString(status));
  }
  return true;
}

}  // namespace

bool add_expert_bias(float* x, const float* table, int64_t n_expert, const int32_t* ids, int64_t n,
                     int64_t n_cols, void* stream, std::string* error) {
  return launch_expert_rows<false>("add_expert_bias", x, table, n_expert, ids, n, n_cols, stream,
                                   error);
}

bool scale_expert_rows(float* x, const float* scales, int64_t n_expert, const int32_t* ids,
                       int64_t n, int64_t n_cols, void* stream, std::string* error) {
  return launch_expert_rows<true>("scale_expert_rows", x, scales, n_expert, ids, n, n_cols, stream,
                                  error);
}

}  // namespace sluice::cuda
