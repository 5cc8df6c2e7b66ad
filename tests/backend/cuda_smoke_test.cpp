// The CUDA backend builds for the target chips and its code runs on the device present. Skips
// (visibly) when the backend was not compiled or no device is there, as in CI.
#include <gtest/gtest.h>

#include <vector>

#ifdef SLUICE_HAVE_CUDA
#include "backend/cuda/cuda_device.h"
#endif

namespace {

TEST(CudaSmoke, KernelRunsOnDevice) {
#ifndef SLUICE_HAVE_CUDA
  GTEST_SKIP() << "CUDA backend not built (no nvcc at configure time)";
#else
  if (sluice::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device present";
  std::vector<float> out(100000);
  std::string error;
  ASSERT_TRUE(sluice::cuda::run_iota_kernel(0.5f, out.data(), int64_t(out.size()), &error))
      << error << " on " << sluice::cuda::describe_device(0);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], float(i) * 0.5f) << "index " << i;
#endif
}

}  // namespace
