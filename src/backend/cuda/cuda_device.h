// Host-side view of the CUDA backend that code outside backend/cuda may call without CUDA
// headers. Only this folder includes cuda_runtime.h.
#pragma once

namespace sluice::cuda {

// Number of usable CUDA devices; 0 when there is no driver or no device.
int device_count();

}  // namespace sluice::cuda
