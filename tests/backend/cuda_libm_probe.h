// A device test's window on backend/cuda/cuda_math.cuh's libm twins, which only kernels can
// call: each input run through the device's expf (cuda_libm_probe.cu).
#pragma once

#include <vector>

namespace sluice::test {

// libm_expf of every element, computed on device 0; throws std::runtime_error on a CUDA error.
std::vector<float> device_libm_expf(const std::vector<float>& x);

}  // namespace sluice::test
