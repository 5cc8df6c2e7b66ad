// CudaBackend's post_norm_add_rms_norm (the sandwich block's post-norm of the branch, residual
// add and next norm in one kernel) on fresh random data each run (seed from the clock, in every
// failure message), outputs poisoned with NaN bytes before each launch:
//   - bit for bit what the device's own three ops give (rms_norm of the branch in place, add,
//     rms_norm of the sum): the same float operations and the same block reduction, so x, the
//     branch and xn must agree exactly — with and without weights, without the second norm (xn
//     nullptr: the last layer), and with xn written over the branch;
//   - the branch within rms_norm's 1 ulp of the CPU's (the double sums differ only in order);
//   - inside a recorded step (a CUDA graph), captured once and replayed, bit for bit what a
//     second backend gives op by op;
//   - x as the norm's output or as the branch refused with an error.
// Skips visibly without the CUDA backend or a device.
#include <gtest/gtest.h>

#ifdef SLUICE_HAVE_CUDA

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda_test_fixture.h"
#include "sluice/error.h"

namespace sluice::test {
namespace {

constexpr float kPostEps = 1e-6f, kEps = 1e-5f;

using CudaPostNormAddTest = CudaDeviceTest;

TEST_F(CudaPostNormAddTest, EqualsTheDevicesThreeOpsBitForBit) {
  for (int64_t n : {1, 64, 640, 1153, 4099}) {
    for (int64_t rows : {1, 7}) {
      const size_t count = size_t(rows * n);
      const auto x = uniform(count, -3.0f, 3.0f);
      const auto branch = uniform(count, -60.0f, 60.0f);  // an un-normed block output
      const auto pw = uniform(size_t(n), -2.0f, 2.0f);
      const auto w = uniform(size_t(n), -2.0f, 2.0f);
      auto dpw = upload(pw);
      auto dw = upload(w);
      for (bool weighted : {true, false}) {
        const float* post_weight = weighted ? dpw.as<float>() : nullptr;
        const float* weight = weighted ? dw.as<float>() : nullptr;
        const std::string what = "n=" + std::to_string(n) + " rows=" + std::to_string(rows) +
                                 (weighted ? " weighted" : "");
        // The three ops it replaces, on the device.
        auto sx = upload(x);
        auto sb = upload(branch);
        auto sxn = poisoned(count * sizeof(float));
        gpu_->rms_norm(sb.as<float>(), post_weight, sb.as<float>(), rows, n, kPostEps);
        gpu_->add(sx.as<float>(), sb.as<float>(), int64_t(count));
        gpu_->rms_norm(sx.as<float>(), weight, sxn.as<float>(), rows, n, kEps);
        const auto split_x = download<float>(sx, count);
        const auto split_branch = download<float>(sb, count);
        const auto split_xn = download<float>(sxn, count);

        std::vector<float> cpu_branch = branch;
        cpu_.rms_norm(cpu_branch.data(), weighted ? pw.data() : nullptr, cpu_branch.data(), rows, n,
                      kPostEps);
        expect_ulps(split_branch, cpu_branch, 1, "branch against the CPU, " + what);

        for (bool with_xn : {true, false}) {
          const std::string case_what = what + (with_xn ? "" : " no xn");
          auto dx = upload(x);
          auto db = upload(branch);
          auto dxn = poisoned(count * sizeof(float));
          gpu_->post_norm_add_rms_norm(dx.as<float>(), db.as<float>(), post_weight, kPostEps,
                                       weight, with_xn ? dxn.as<float>() : nullptr, rows, n, kEps);
          expect_bits(download<float>(dx, count), split_x, "fused x, " + case_what);
          expect_bits(download<float>(db, count), split_branch, "fused branch, " + case_what);
          if (with_xn) expect_bits(download<float>(dxn, count), split_xn, "fused xn, " + what);
        }
        auto dx = upload(x);
        auto db = upload(branch);  // the norm lands over the branch it read
        gpu_->post_norm_add_rms_norm(dx.as<float>(), db.as<float>(), post_weight, kPostEps, weight,
                                     db.as<float>(), rows, n, kEps);
        expect_bits(download<float>(dx, count), split_x, "x, xn over branch, " + what);
        expect_bits(download<float>(db, count), split_xn, "xn over branch, " + what);
      }
    }
  }
  auto da = upload(uniform(64, -1.0f, 1.0f));
  auto db = upload(uniform(64, -1.0f, 1.0f));
  EXPECT_THROW(gpu_->post_norm_add_rms_norm(da.as<float>(), db.as<float>(), nullptr, kPostEps,
                                            nullptr, da.as<float>(), 1, 64, kEps),
               Error);
  EXPECT_THROW(gpu_->post_norm_add_rms_norm(da.as<float>(), da.as<float>(), nullptr, kPostEps,
                                            nullptr, db.as<float>(), 1, 64, kEps),
               Error);
}

// A decode step of the op (uploads, the fused op with host weights, downloads) recorded on the
// fixture's backend — captured once, then replayed — against a second backend running it op by
// op on its own buffers: bit for bit at every step.
TEST_F(CudaPostNormAddTest, RecordedAndReplayedStepsEqualPlainOnes) {
  const int64_t rows = 1, n = 640;
  const size_t count = size_t(rows * n);
  const auto post_weight = uniform(size_t(n), 0.5f, 1.5f);  // host weights, mirrored once
  const auto weight = uniform(size_t(n), 0.5f, 1.5f);
  cuda::CudaBackend plain;
  struct Buffers {
    std::unique_ptr<Allocation> x, branch, xn;
  };
  const auto buffers = [&](Backend& b) {
    return Buffers{std::make_unique<Allocation>(b, count * 4),
                   std::make_unique<Allocation>(b, count * 4),
                   std::make_unique<Allocation>(b, count * 4)};
  };
  Buffers rec = buffers(*gpu_), ref = buffers(plain);
  struct Result {
    std::vector<float> x, branch, xn;
  };
  const auto step = [&](Backend& b, const Buffers& s, const std::vector<float>& x,
                        const std::vector<float>& branch, Result& r) {
    r = {std::vector<float>(count), std::vector<float>(count), std::vector<float>(count)};
    b.upload(s.x->data(), x.data(), count * 4);
    b.upload(s.branch->data(), branch.data(), count * 4);
    b.post_norm_add_rms_norm(s.x->data(), s.branch->data(), post_weight.data(), kPostEps,
                             weight.data(), s.xn->data(), rows, n, kEps);
    b.download(r.x.data(), s.x->data(), count * 4);
    b.download(r.branch.data(), s.branch->data(), count * 4);
    b.download(r.xn.data(), s.xn->data(), count * 4);
  };
  Result got, expected;
  step(*gpu_, rec, uniform(count, -3.0f, 3.0f), uniform(count, -60.0f, 60.0f), got);
  const uint64_t captures0 = gpu_->captured_steps(), replays0 = gpu_->replayed_steps();
  for (int i = 0; i < 3; ++i) {
    const auto x = uniform(count, -3.0f, 3.0f);
    const auto branch = uniform(count, -60.0f, 60.0f);
    ASSERT_TRUE(gpu_->begin_recorded_step());
    step(*gpu_, rec, x, branch, got);
    gpu_->end_recorded_step();
    step(plain, ref, x, branch, expected);
    const std::string what = "recorded step " + std::to_string(i);
    expect_bits(got.x, expected.x, what + " x");
    expect_bits(got.branch, expected.branch, what + " branch");
    expect_bits(got.xn, expected.xn, what + " xn");
  }
  EXPECT_EQ(gpu_->captured_steps() - captures0, 1u) << where();
  EXPECT_EQ(gpu_->replayed_steps() - replays0, 2u) << where();
}

}  // namespace
}  // namespace sluice::test

#else

TEST(CudaPostNormAddTest, Skipped) {
  GTEST_SKIP() << "CUDA backend not built (no nvcc at configure time)";
}

#endif
