// Backend::post_norm_add_rms_norm (the sandwich block's post-norm, residual add and next norm in
// one op) on the CPU and under the checked backend: bit for bit the numbers of the three ops it
// replaced — rms_norm of the branch in place, add, rms_norm of the sum — on fresh random data,
// branch included, with and without weights, with the norm over the branch, and without the
// second norm (xn nullptr: the last layer). The CUDA kernel's test is in cuda_backend_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/checked/checked_memory_backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/seeded_test.h"
#include "core/error.h"

namespace sluice::test {
namespace {

std::vector<float> random_floats(size_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) {
    do x = dist(rng);
    while (x == 0.0f);  // a zero would hide a missed scale
  }
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Inputs {
  std::vector<float> x, branch, post_weight, weight;
};

struct Outputs {
  std::vector<float> x, branch, xn;
};

// The sequence SandwichDecoder ran before the fused op, on the CPU backend.
Outputs three_ops(const Inputs& in, bool weighted, bool with_xn, int64_t rows, int64_t n) {
  cpu::CpuBackend cpu(nullptr);
  Outputs out{in.x, in.branch, std::vector<float>(in.x.size(), -1.0f)};
  cpu.rms_norm(out.branch.data(), weighted ? in.post_weight.data() : nullptr, out.branch.data(),
               rows, n, 1e-6f);
  cpu.add(out.x.data(), out.branch.data(), rows * n);
  if (with_xn) {
    cpu.rms_norm(out.x.data(), weighted ? in.weight.data() : nullptr, out.xn.data(), rows, n,
                 1e-5f);
  }
  return out;
}

class PostNormAddRmsNorm : public SeededTest {
 protected:
  Inputs inputs(int64_t rows, int64_t n) {
    const size_t count = size_t(rows * n);
    // The branch far larger than x, as an attention or FFN output before its post-norm.
    return {random_floats(count, rng_, 1.0f), random_floats(count, rng_, 40.0f),
            random_floats(size_t(n), rng_, 2.0f), random_floats(size_t(n), rng_, 2.0f)};
  }

  std::string where(int64_t rows, int64_t n, bool weighted, bool with_xn) const {
    return SeededTest::where() + " rows=" + std::to_string(rows) + " n=" + std::to_string(n) +
           (weighted ? " weighted" : "") + (with_xn ? "" : " no xn");
  }
};

TEST_F(PostNormAddRmsNorm, CpuEqualsTheThreeOpsBitForBit) {
  cpu::CpuBackend cpu(nullptr);
  for (int64_t n : {1, 40, 640, 1153}) {
    for (int64_t rows : {1, 5}) {
      const Inputs in = inputs(rows, n);
      for (bool weighted : {true, false}) {
        for (bool with_xn : {true, false}) {
          const std::string what = where(rows, n, weighted, with_xn);
          const Outputs want = three_ops(in, weighted, with_xn, rows, n);
          Outputs got{in.x, in.branch, std::vector<float>(in.x.size(), -1.0f)};
          cpu.post_norm_add_rms_norm(got.x.data(), got.branch.data(),
                                     weighted ? in.post_weight.data() : nullptr, 1e-6f,
                                     weighted ? in.weight.data() : nullptr,
                                     with_xn ? got.xn.data() : nullptr, rows, n, 1e-5f);
          EXPECT_TRUE(same_bits(got.x, want.x)) << "x, " << what;
          EXPECT_TRUE(same_bits(got.branch, want.branch)) << "branch, " << what;
          EXPECT_TRUE(same_bits(got.xn, want.xn)) << "xn, " << what;
          EXPECT_FALSE(same_bits(got.x, in.x)) << "x unchanged, " << what;
          if (!with_xn) continue;
          // The norm written over the branch it read: x as before, the branch ends as xn.
          std::vector<float> x = in.x, branch = in.branch;
          cpu.post_norm_add_rms_norm(
              x.data(), branch.data(), weighted ? in.post_weight.data() : nullptr, 1e-6f,
              weighted ? in.weight.data() : nullptr, branch.data(), rows, n, 1e-5f);
          EXPECT_TRUE(same_bits(x, want.x)) << "x, xn over branch, " << what;
          EXPECT_TRUE(same_bits(branch, want.xn)) << "xn over branch, " << what;
        }
      }
    }
  }
}

// The checked backend's wrapper hands the op to its inner CPU backend (the same bits) and holds
// it to the memory rules: every activation argument must be its memory; xn nullptr is allowed.
TEST_F(PostNormAddRmsNorm, CheckedBackendGivesTheCpuNumbersAndChecksArguments) {
  checked::CheckedMemoryBackend checked(std::make_unique<cpu::CpuBackend>(nullptr));
  const auto upload = [&](const std::vector<float>& values) {
    auto* p = static_cast<float*>(checked.allocate(values.size() * sizeof(float)));
    checked.upload(p, values.data(), values.size() * sizeof(float));
    return p;
  };
  const auto download = [&](const float* p, size_t n) {
    std::vector<float> out(n);
    checked.download(out.data(), p, n * sizeof(float));
    return out;
  };
  const int64_t rows = 3, n = 640;
  const size_t count = size_t(rows * n);
  const Inputs in = inputs(rows, n);
  for (bool with_xn : {true, false}) {
    const Outputs want = three_ops(in, true, with_xn, rows, n);
    float* x = upload(in.x);
    float* branch = upload(in.branch);
    float* xn = upload(std::vector<float>(count, -1.0f));
    // Weights stay host memory, as a GPU allows.
    checked.post_norm_add_rms_norm(x, branch, in.post_weight.data(), 1e-6f, in.weight.data(),
                                   with_xn ? xn : nullptr, rows, n, 1e-5f);
    const std::string what = where(rows, n, true, with_xn);
    EXPECT_TRUE(same_bits(download(x, count), want.x)) << "x, " << what;
    EXPECT_TRUE(same_bits(download(branch, count), want.branch)) << "branch, " << what;
    EXPECT_TRUE(same_bits(download(xn, count), want.xn)) << "xn, " << what;
  }
  float* x = upload(in.x);
  float* branch = upload(in.branch);
  std::vector<float> host(count);
  try {
    checked.post_norm_add_rms_norm(x, branch, nullptr, 1e-6f, nullptr, host.data(), rows, n, 1e-5f);
    FAIL() << "a host xn was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "checked backend: post_norm_add_rms_norm: xn is not backend memory");
  }
  EXPECT_THROW(checked.post_norm_add_rms_norm(x, host.data(), nullptr, 1e-6f, nullptr, nullptr,
                                              rows, n, 1e-5f),
               Error);
}

}  // namespace
}  // namespace sluice::test
