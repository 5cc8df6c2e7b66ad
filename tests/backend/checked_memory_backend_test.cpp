// CheckedMemoryBackend (backend/checked): the checks it exists for must fire — a host read of
// its memory outside an op faults, an activation that is not its memory or runs past its
// allocation is refused with the op and argument named, an op after a download inside a recorded
// step fails — and inside the rules it gives the inner CPU backend's numbers.
#include "backend/checked/checked_memory_backend.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
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

// Recorded steps (Backend::begin_recorded_step): markers here, so that the runtime's recording
// path runs on the CPU too. A download inside one lands when the step ends, as a CUDA graph's
// staged download does.
TEST_F(CheckedMemoryBackendTest, RecordedStepCompletesItsDownloadsAtItsEnd) {
  const std::vector<float> x = random_floats(8, 7);
  float* a = upload(x);
  float* b = upload(x);
  ASSERT_TRUE(checked_.begin_recorded_step());
  checked_.add(a, b, 8);  // a = 2x
  std::vector<float> logits(8, -1.0f);
  checked_.download(logits.data(), a, 8 * sizeof(float));
  std::vector<float> second(8, -1.0f);
  checked_.download(second.data(), b, 8 * sizeof(float));  // downloads may follow downloads
  EXPECT_EQ(logits, std::vector<float>(8, -1.0f)) << "a download arrived before the step ran";
  checked_.end_recorded_step();
  std::vector<float> doubled(x);
  for (float& v : doubled) v += v;
  EXPECT_EQ(logits, doubled);
  EXPECT_EQ(second, x);
  // After the step, ops and plain downloads work as before, in any order.
  checked_.add(a, b, 8);
  EXPECT_EQ(download(b, 8), x);
  checked_.add(a, b, 8);
}

// The host reading a download to decide what to queue next (a router choosing on the host) is
// what a recorded step cannot hold: an op after a download fails, naming the download, and so
// does everything after it — the runtime's unrecorded retry must not hide it.
TEST_F(CheckedMemoryBackendTest, OpAfterADownloadInsideARecordedStepFails) {
  float* a = upload(std::vector<float>(4, 1.0f));
  float* b = upload(std::vector<float>(4, 2.0f));
  ASSERT_TRUE(checked_.begin_recorded_step());
  std::vector<float> probs(4);
  checked_.download(probs.data(), a, 4 * sizeof(float));
  const std::string expected =
      "checked backend: download inside a recorded step with ops queued after it: the host "
      "cannot read it before the step has run, so the model's decode_reads_host() must say true";
  try {
    checked_.add(a, b, 4);
    FAIL() << "an op after a download inside a recorded step was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.what(), expected);
  }
  checked_.abort_recorded_step();
  for (auto op : std::initializer_list<std::function<void()>>{
           [&] { checked_.add(a, b, 4); },
           [&] { checked_.upload(a, probs.data(), 4 * sizeof(float)); },
           [&] { checked_.begin_recorded_step(); }}) {
    try {
      op();
      FAIL() << "the backend ran on after a recorded step's violation";
    } catch (const Error& e) {
      EXPECT_EQ(e.what(), expected);
    }
  }
}

TEST_F(CheckedMemoryBackendTest, UploadAfterADownloadInsideARecordedStepFails) {
  float* a = upload(std::vector<float>(4, 1.0f));
  ASSERT_TRUE(checked_.begin_recorded_step());
  std::vector<float> host(4);
  checked_.download(host.data(), a, 4 * sizeof(float));
  EXPECT_THROW(checked_.upload(a, host.data(), 4 * sizeof(float)), Error);
}

// Outside recorded steps a download followed by ops is the ordinary host round trip.
TEST_F(CheckedMemoryBackendTest, DownloadThenOpOutsideARecordedStepIsFine) {
  float* a = upload(std::vector<float>(4, 1.0f));
  float* b = upload(std::vector<float>(4, 2.0f));
  EXPECT_EQ(download(a, 4), std::vector<float>(4, 1.0f));
  checked_.add(a, b, 4);
  EXPECT_EQ(download(a, 4), std::vector<float>(4, 3.0f));
}

// Its ops ran at once, so a step that failed for any other reason cannot be run again either.
TEST_F(CheckedMemoryBackendTest, AbortedStepStopsTheBackend) {
  float* a = upload(std::vector<float>(4, 1.0f));
  ASSERT_TRUE(checked_.begin_recorded_step());
  checked_.scale(a, 2.0f, 4);
  checked_.abort_recorded_step();
  EXPECT_THROW(checked_.scale(a, 2.0f, 4), Error);
}

TEST_F(CheckedMemoryBackendTest, RefusesAnInnerBackendWithoutHostMemory) {
  EXPECT_THROW(checked::CheckedMemoryBackend(nullptr), Error);
}

}  // namespace
}  // namespace sluice::test
