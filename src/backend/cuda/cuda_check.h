// Internal to backend/cuda (includes CUDA headers): turns a failed CUDA call into sluice::Error
// with CUDA's one-line error text, so a device failure reaches the caller as an error and never
// aborts the process.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdio>

#include "core/error.h"

namespace sluice::cuda {

inline void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) fail("cuda: ", what, ": ", cudaGetErrorString(status));
}

// After a kernel launch: reports a bad launch configuration (not the kernel's own faults, which
// surface at the next synchronisation).
inline void check_launch(const char* kernel) {
  check(cudaGetLastError(), kernel);
}

// cudaMalloc's status. Running out of memory names the size asked for ("cuda: out of device
// memory allocating 1.50 GiB") and clears the error, so the backend stays usable.
inline void check_allocation(cudaError_t status, size_t bytes) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // not sticky, but it would be reported by the next check_launch
  if (status != cudaErrorMemoryAllocation) fail("cuda: cudaMalloc: ", cudaGetErrorString(status));
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double size = double(bytes);
  int unit = 0;
  while (size >= 1024.0 && unit < 5) size /= 1024.0, ++unit;
  char text[64];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.2f %s", size, units[unit]);
  fail("cuda: out of device memory allocating ", text);
}

inline cudaStream_t as_stream(void* handle) {
  return static_cast<cudaStream_t>(handle);
}

}  // namespace sluice::cuda
