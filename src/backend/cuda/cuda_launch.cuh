// Internal to backend/cuda: programmatic dependent launch (sm_90+), which lets a decode step's
// kernels be scheduled before the kernel ahead of them has finished. A decode step is a chain of
// ~300 kernels, most of them a few microseconds long; between two plain launches the GPU drains
// the first grid before it starts setting up the second. A kernel launched with programmatic
// stream serialization (launch_dependent) may start as soon as every block of the kernel ahead
// has called allow_dependent_launch (or exited); it must call wait_for_prerequisite before it
// touches memory, which returns once the kernel ahead has completed and its writes are visible.
// Kernels ahead of a dependent call allow_dependent_launch as early as they like: the dependents
// wait anyway; those without a dependent launched this way lose nothing.
// Measured and kept for the int8 products after their activations' quantization (quant_int8_
// matvec.cuh); for the chain of norms, attention and quantization kernels see docs/BENCHMARKS.md.
// SLUICE_CUDA_PDL=0 launches that chain plainly (the products keep theirs).
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>

namespace sluice::cuda {

__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void wait_for_prerequisite() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Whether the current device can launch dependents early (compute capability 9 or later).
inline bool device_launches_dependents() {
  int device = 0, major = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  return major >= 9;
}

// `kernel` on `stream`, launched as a dependent of the kernel ahead of it where the device can
// and `chained` allows. The kernel must call wait_for_prerequisite before touching memory.
template <class... Params, class... Args>
cudaError_t launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared,
                             cudaStream_t stream, bool chained, Args... args) {
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  config.attrs = attribute;
  config.numAttrs = chained && device_launches_dependents() ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, args...);
}

// The chain of small decode kernels (norms, attention, activation quantization): launched as
// dependents unless SLUICE_CUDA_PDL=0.
inline bool chain_small_kernels() {
  static const bool chained = [] {
    const char* value = std::getenv("SLUICE_CUDA_PDL");
    return value == nullptr || std::strcmp(value, "0") != 0;
  }();
  return chained;
}

template <class... Params, class... Args>
cudaError_t launch_chained(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared,
                           cudaStream_t stream, Args... args) {
  return launch_dependent(kernel, grid, block, shared, stream, chain_small_kernels(), args...);
}

}  // namespace sluice::cuda
