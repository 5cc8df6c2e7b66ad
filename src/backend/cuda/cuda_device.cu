// Device discovery and the smoke-test kernel of the CUDA backend. Errors are returned, not
// thrown: this unit sits below the public API and must not let CUDA failures abort the process.
#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/cuda_device.h"

namespace sluice::cuda {
namespace {

__global__ void iota_kernel(float scale, float* out, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = float(i) * scale;
}

bool ok(cudaError_t status, const char* what, std::string* error) {
  if (status == cudaSuccess) return true;
  if (error) *error = std::string(what) + ": " + cudaGetErrorString(status);
  return false;
}

}  // namespace

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

std::string describe_device(int index) {
  cudaDeviceProp properties{};
  if (cudaGetDeviceProperties(&properties, index) != cudaSuccess) return "unknown device";
  return std::string(properties.name) + " (sm_" + std::to_string(properties.major) +
         std::to_string(properties.minor) + ")";
}

double measure_host_to_device_bytes_per_s() {
  constexpr size_t kBytes = size_t(256) << 20;
  void* host = nullptr;
  void* device = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  double best = 0;
  if (cudaMallocHost(&host, kBytes) == cudaSuccess && cudaMalloc(&device, kBytes) == cudaSuccess &&
      cudaEventCreate(&start) == cudaSuccess && cudaEventCreate(&stop) == cudaSuccess) {
    for (int i = 0; i < 4; ++i) {  // the first is a warm-up
      float ms = 0;
      if (cudaEventRecord(start) != cudaSuccess ||
          cudaMemcpyAsync(device, host, kBytes, cudaMemcpyHostToDevice) != cudaSuccess ||
          cudaEventRecord(stop) != cudaSuccess || cudaEventSynchronize(stop) != cudaSuccess ||
          cudaEventElapsedTime(&ms, start, stop) != cudaSuccess) {
        best = 0;
        break;
      }
      if (i > 0 && ms > 0) best = std::max(best, double(kBytes) / (double(ms) * 1e-3));
    }
  }
  if (start) cudaEventDestroy(start);
  if (stop) cudaEventDestroy(stop);
  if (device) cudaFree(device);
  if (host) cudaFreeHost(host);
  cudaGetLastError();
  return best;
}

bool device_memory(int index, uint64_t* free_bytes, uint64_t* total_bytes) {
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess || cudaSetDevice(index) != cudaSuccess) return false;
  size_t free = 0, total = 0;
  const bool ok = cudaMemGetInfo(&free, &total) == cudaSuccess;
  cudaSetDevice(previous);
  *free_bytes = free;
  *total_bytes = total;
  return ok;
}

bool run_iota_kernel(float scale, float* out, int64_t n, std::string* error) {
  float* device_out = nullptr;  // [n]
  const size_t bytes = size_t(n) * sizeof(float);
  if (!ok(cudaMalloc(&device_out, bytes), "cudaMalloc", error)) return false;
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;
  iota_kernel<<<unsigned(blocks), threads>>>(scale, device_out, n);
  bool success =
      ok(cudaGetLastError(), "iota_kernel launch", error) &&
      ok(cudaMemcpy(out, device_out, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy", error);
  cudaFree(device_out);
  return success;
}

}  // namespace sluice::cuda
