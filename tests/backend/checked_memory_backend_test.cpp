// CheckedMemoryBackend (backend/checked): the checks it exists for must fire — a host read of
// its memory outside an op faults, an activation that is not its memory or runs past its
// allocation is refused with the op and argument named — and inside the rules it gives the inner
// CPU backend's numbers.
#include "backend/checked/checked_memory_backend.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace sluice::test {
namespace {

class CheckedMemoryBackendTest : public ::testing::Test {
 protected:
  CheckedMemoryBackendTest() : checked_(std::make_unique<cpu::CpuBackend>(nullptr)) {}

  // n floats of checked memory holding `values`.
  float* upload(const std::vector<float>& values) {
    auto* p = static_cast<float*>(checked_.allocate(values.size() * sizeof(float)));
    checked_.upload(p, values.data(), values.size() * sizeof(float));
    return p;
  }
  std::vector<float> download(const float* p, size_t n) {
    std::vector<float> out(n);
    checked_.download(out.data(), p, n * sizeof(float));
    return out;
  }

  checked::CheckedMemoryBackend checked_;
};

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST_F(CheckedMemoryBackendTest, SaysItsMemoryIsNotTheHosts) {
  EXPECT_FALSE(checked_.host_memory());
}

TEST_F(CheckedMemoryBackendTest, OpsGiveTheInnerBackendsNumbers) {
  const uint32_t seed = uint32_t(std::chrono::steady_clock::now().time_since_epoch().count());
  const int64_t rows = 3, cols = 40;
  const std::vector<float> w = random_floats(size_t(rows * cols), seed);
  const std::vector<float> x = random_floats(size_t(2 * cols), seed + 1);
  const MatrixView weight{QType::F32, w.data(), cols, rows};  // a host weight, as a GPU allows
  float* x_dev = upload(x);
  float* y_dev = upload(std::vector<float>(size_t(2 * rows), 0.0f));
  checked_.matmul(weight, x_dev, y_dev, 2);
  checked_.rms_norm(y_dev, nullptr, y_dev, 2, rows, 1e-6f);

  cpu::CpuBackend plain(nullptr);
  std::vector<float> y(size_t(2 * rows));
  plain.matmul(weight, x.data(), y.data(), 2);
  plain.rms_norm(y.data(), nullptr, y.data(), 2, rows, 1e-6f);
  EXPECT_EQ(download(y_dev, y.size()), y) << "seed " << seed;

  // The strided copy: the second half of each row into a packed block.
  float* packed = upload(std::vector<float>(size_t(2 * cols / 2), 0.0f));
  checked_.copy_strided_rows(x_dev + cols / 2, cols, packed, cols / 2, 2, cols / 2);
  const std::vector<float> got = download(packed, size_t(cols));
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t c = 0; c < cols / 2; ++c) {
      EXPECT_EQ(got[size_t(r * cols / 2 + c)], x[size_t(r * cols + cols / 2 + c)]);
    }
  }
}

TEST_F(CheckedMemoryBackendTest, RefusesHostActivationsNamingOpAndArgument) {
  std::vector<float> host(16, 1.0f);
  float* dev = upload(std::vector<float>(16, 0.0f));
  try {
    checked_.add(dev, host.data(), 16);
    FAIL() << "a host activation was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "checked backend: add: x is not backend memory");
  }
}

TEST_F(CheckedMemoryBackendTest, RefusesArgumentsRunningPastTheirAllocation) {
  float* a = upload(std::vector<float>(16, 0.0f));
  float* b = upload(std::vector<float>(16, 0.0f));
  EXPECT_THROW(checked_.add(a + 8, b, 16), Error);                    // 8 floats past a's end
  EXPECT_THROW(checked_.copy_strided_rows(a, 8, b, 8, 3, 8), Error);  // three rows of 8 in 16
  checked_.add(a + 8, b, 8);                                          // the last 8 are fine
}

TEST_F(CheckedMemoryBackendTest, HostReadOutsideAnOpFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float* dev = upload(std::vector<float>(4, 2.0f));
  EXPECT_DEATH(
      {
        volatile float v = dev[0];
        (void)v;
      },
      "");
  // Inside the rules the bytes are there.
  EXPECT_EQ(download(dev, 4), std::vector<float>(4, 2.0f));
}

TEST_F(CheckedMemoryBackendTest, RefusesAnInnerBackendWithoutHostMemory) {
  EXPECT_THROW(checked::CheckedMemoryBackend(nullptr), Error);
}

}  // namespace
}  // namespace sluice::test
