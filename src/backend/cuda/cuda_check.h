// Internal to backend/cuda (includes CUDA headers): turns a failed CUDA call into sluice::Error
// with CUDA's one-line error text, so a device failure reaches the caller as an error and never
// aborts the process.
#pragma once

#include <cuda_runtime.h>

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

inline cudaStream_t as_stream(void* handle) {
  return static_cast<cudaStream_t>(handle);
}

}  // namespace sluice::cuda
