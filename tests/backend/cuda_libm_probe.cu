#include "cuda_libm_probe.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "backend/cuda/cuda_math.cuh"

namespace sluice::test {
namespace {

__global__ void expf_kernel(const float* x, float* y, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    y[i] = cuda::libm_expf(x[i]);
  }
}

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
  }
}

}  // namespace

std::vector<float> device_libm_expf(const std::vector<float>& x) {
  const size_t bytes = x.size() * sizeof(float);
  std::vector<float> y(x.size());
  float* dx = nullptr;
  float* dy = nullptr;
  check(cudaMalloc(&dx, bytes), "cudaMalloc");
  check(cudaMalloc(&dy, bytes), "cudaMalloc");
  check(cudaMemcpy(dx, x.data(), bytes, cudaMemcpyHostToDevice), "copy to device");
  expf_kernel<<<1024, 256>>>(dx, dy, x.size());
  check(cudaGetLastError(), "expf_kernel");
  check(cudaMemcpy(y.data(), dy, bytes, cudaMemcpyDeviceToHost), "copy to host");
  check(cudaFree(dx), "cudaFree");
  check(cudaFree(dy), "cudaFree");
  return y;
}

}  // namespace sluice::test
