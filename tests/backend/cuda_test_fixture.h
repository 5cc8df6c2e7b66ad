// What the CUDA device tests share: a fixture base that skips without a device, draws fresh
// random data each run (SeededTest, seeded_test.h: the seed in every failure message, never a
// zero), and moves data
// to and from the device, outputs poisoned with NaN bytes (0xff) so an element a launch never
// wrote cannot pass as equal. Two kinds of device memory: cuda::DeviceBuffer (upload, poisoned,
// download) and the backend's own allocate() (Allocation: on_device, poisoned_allocation,
// fetch), the latter being what the model's forward uses.
#pragma once

#ifdef SLUICE_HAVE_CUDA

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/seeded_test.h"
#include "core/half.h"

namespace sluice::test {

// Distance in representable floats (0: identical bits or both zero; NaN: huge).
inline int64_t ulp_distance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<int64_t>::max();
  const auto ordered = [](float f) {
    const int32_t i = int32_t(fp32_to_bits(f));
    return i < 0 ? int64_t(std::numeric_limits<int32_t>::min()) - i : int64_t(i);
  };
  return std::llabs(ordered(a) - ordered(b));
}

// Memory from a backend's allocate(), returned by deallocate() at scope exit. data() is typed
// float (most ops take floats); as<T>() for other element types.
class Allocation {
 public:
  Allocation(Backend& backend, size_t bytes) : backend_(backend), p_(backend.allocate(bytes)) {}
  ~Allocation() { backend_.deallocate(p_); }
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;
  float* data() const { return static_cast<float*>(p_); }
  template <class T = float>
  T* as() const {
    return static_cast<T*>(p_);
  }

 private:
  Backend& backend_;
  void* p_;
};

class CudaDeviceTest : public SeededTest {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device present";
    gpu_ = std::make_unique<cuda::CudaBackend>();
  }

  // cuda::DeviceBuffer: at least one byte, so an empty input still has an address.
  template <class T>
  cuda::DeviceBuffer upload(const std::vector<T>& host) {
    cuda::DeviceBuffer buffer(std::max<size_t>(1, host.size() * sizeof(T)));
    cuda::copy_to_device(buffer.data(), host.data(), host.size() * sizeof(T), gpu_->stream());
    return buffer;
  }
  cuda::DeviceBuffer poisoned(size_t bytes) {
    cuda::DeviceBuffer buffer(std::max<size_t>(1, bytes));
    cuda::fill_bytes(buffer.data(), 0xff, bytes, gpu_->stream());
    return buffer;
  }
  template <class T>
  std::vector<T> download(const cuda::DeviceBuffer& buffer, size_t n) {
    std::vector<T> host(n);
    cuda::copy_to_host(host.data(), buffer.data(), n * sizeof(T), gpu_->stream());
    gpu_->synchronize();
    return host;
  }

  // The backend's own memory (allocate / upload / download).
  template <class T>
  std::unique_ptr<Allocation> on_device(const std::vector<T>& host) {
    auto memory = std::make_unique<Allocation>(*gpu_, host.size() * sizeof(T));
    gpu_->upload(memory->data(), host.data(), host.size() * sizeof(T));
    return memory;
  }
  std::unique_ptr<Allocation> poisoned_allocation(size_t bytes) {
    auto memory = std::make_unique<Allocation>(*gpu_, bytes);
    cuda::fill_bytes(memory->data(), 0xff, bytes, gpu_->stream());
    return memory;
  }
  template <class T = float>
  std::vector<T> fetch(const Allocation& memory, size_t n) {
    std::vector<T> host(n);
    gpu_->download(host.data(), memory.data(), n * sizeof(T));
    return host;
  }

  // Equal bit patterns, and no poison (0xffffffff) left in `got`: an element neither launch
  // wrote must not pass as equal.
  void expect_bits(const std::vector<float>& got, const std::vector<float>& expected,
                   const std::string& what) {
    ASSERT_EQ(got.size(), expected.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      const uint32_t a = fp32_to_bits(got[i]), b = fp32_to_bits(expected[i]);
      ASSERT_NE(a, 0xffffffffu) << what << ": element " << i << " never written (" << where()
                                << ")";
      ASSERT_EQ(a, b) << what << ": element " << i << " got " << got[i] << " expected "
                      << expected[i] << " (" << where() << ")";
    }
  }
  // Every element within `max_ulp` of the CPU's.
  void expect_ulps(const std::vector<float>& gpu, const std::vector<float>& cpu, int64_t max_ulp,
                   const std::string& what) {
    ASSERT_EQ(gpu.size(), cpu.size());
    int64_t worst = 0;
    size_t worst_at = 0;
    for (size_t i = 0; i < gpu.size(); ++i) {
      const int64_t d = ulp_distance(gpu[i], cpu[i]);
      if (d > worst) worst = d, worst_at = i;
    }
    EXPECT_LE(worst, max_ulp) << what << ": element " << worst_at << " gpu " << gpu[worst_at]
                              << " cpu " << cpu[worst_at] << " (" << where() << ")";
  }

  std::unique_ptr<cuda::CudaBackend> gpu_;
  cpu::CpuBackend cpu_{nullptr};
};

}  // namespace sluice::test

#endif  // SLUICE_HAVE_CUDA
