// CUDA backend entry: device discovery. The kernels arrive with the CUDA backend issue; this
// unit proves the toolchain builds for the target architectures and reports the device count.
#include <cuda_runtime.h>

#include "backend/cuda/cuda_device.h"

namespace sluice::cuda {

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;  // no driver or no device
  return count;
}

}  // namespace sluice::cuda
