// CudaBackend's DeepSeek V4 ops against CpuBackend's: hyper_mix (layer and head mixers),
// hyper_fold, hyper_expand, clamp_swiglu, kv_compress (overlapping and not, a chunk then single
// tokens through the state) and gather_key_cells (F16 and F32 cells). Fresh random data each run
// (the seed, from the clock, is in every failure message), device outputs poisoned with NaN
// bytes (0xff) before each launch. Tolerances, each with its reason, at the comparison. Skips
// visibly without a device.
#include <gtest/gtest.h>

#ifdef SLUICE_HAVE_CUDA

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda_test_fixture.h"

namespace sluice::test {
namespace {

using cuda::DeviceBuffer;

class CudaDeepSeek4Test : public CudaDeviceTest {
 protected:
  void expect_bit_equal(const std::vector<float>& got, const std::vector<float>& want,
                        const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
          << what << " element " << i << ": " << got[i] << " vs " << want[i] << " (" << where()
          << ")";
    }
  }
  void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tolerance,
                    const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << what << " element " << i << " (" << where() << ")";
      ASSERT_NEAR(got[i], want[i], tolerance * std::max(1.0, std::fabs(double(want[i]))))
          << what << " element " << i << " (" << where() << ")";
    }
  }

  // A weight for the device: a copy that lives as long as the test. The backend mirrors host
  // weights by address, once, so a freed vector's address reused for other values would be
  // served the old copy.
  const float* keep(const std::vector<float>& weight) {
    kept_.push_back(weight);
    return kept_.back().data();
  }

  std::vector<std::vector<float>> kept_;
};

TEST_F(CudaDeepSeek4Test, HyperMixMatchesCpu) {
  for (const int64_t hc : {1, 4, 7}) {
    for (const bool head : {false, true}) {
      const int64_t n = 37, width = head ? hc : (2 + hc) * hc, iterations = 20;
      const float eps = 1e-6f;
      const auto mixes = uniform(size_t(n * width), -4.0f, 4.0f);
      const auto scale = uniform(head ? 1 : 3, 0.2f, 2.0f);
      const auto base = uniform(size_t(width), -1.0f, 1.0f);
      std::vector<float> pre(size_t(n * hc)), post(size_t(n * hc)), comb(size_t(n * hc * hc));
      cpu_.hyper_mix(mixes.data(), scale.data(), base.data(), n, hc, iterations, eps, pre.data(),
                     head ? nullptr : post.data(), head ? nullptr : comb.data());
      auto g_mixes = upload(mixes);
      auto g_pre = poisoned(pre.size() * 4), g_post = poisoned(post.size() * 4);
      auto g_comb = poisoned(comb.size() * 4);
      gpu_->hyper_mix(g_mixes.as<float>(), keep(scale), keep(base), n, hc, iterations, eps,
                      g_pre.as<float>(), head ? nullptr : g_post.as<float>(),
                      head ? nullptr : g_comb.as<float>());
      const std::string what = "hc " + std::to_string(hc) + (head ? " head" : "");
      // expf on the device and std::exp on the host may differ in the last bit; the sigmoid
      // keeps that within 2 ulp of values below 2, and each of the Sinkhorn rounds' divisions by
      // sums near 1 adds an ulp at most: 1e-5 relative covers 20 rounds with room.
      expect_close(download<float>(g_pre, pre.size()), pre, 1e-5, what + " pre");
      if (head) continue;
      expect_close(download<float>(g_post, post.size()), post, 1e-5, what + " post");
      expect_close(download<float>(g_comb, comb.size()), comb, 1e-5, what + " comb");
    }
  }
}

TEST_F(CudaDeepSeek4Test, HyperFoldAndExpandAreBitEqual) {
  const int64_t n = 19, hc = 4, d = 300;
  const auto streams = uniform(size_t(n * hc * d), -3.0f, 3.0f);
  const auto weights = uniform(size_t(n * hc), 0.0f, 2.0f);
  const auto branch = uniform(size_t(n * d), -3.0f, 3.0f);
  const auto post = uniform(size_t(n * hc), 0.0f, 2.0f);
  const auto comb = uniform(size_t(n * hc * hc), 0.0f, 1.0f);
  std::vector<float> x(size_t(n * d)), out(size_t(n * hc * d));
  cpu_.hyper_fold(streams.data(), weights.data(), n, hc, d, x.data());
  cpu_.hyper_expand(branch.data(), post.data(), comb.data(), streams.data(), n, hc, d, out.data());
  auto g_streams = upload(streams), g_weights = upload(weights), g_branch = upload(branch);
  auto g_post = upload(post), g_comb = upload(comb);
  auto g_x = poisoned(x.size() * 4), g_out = poisoned(out.size() * 4);
  gpu_->hyper_fold(g_streams.as<float>(), g_weights.as<float>(), n, hc, d, g_x.as<float>());
  gpu_->hyper_expand(g_branch.as<float>(), g_post.as<float>(), g_comb.as<float>(),
                     g_streams.as<float>(), n, hc, d, g_out.as<float>());
  // The same products and adds in the same order, each rounded (no fused multiply-add).
  expect_bit_equal(download<float>(g_x, x.size()), x, "hyper_fold");
  expect_bit_equal(download<float>(g_out, out.size()), out, "hyper_expand");
}

TEST_F(CudaDeepSeek4Test, ClampSwigluIsBitEqual) {
  const int64_t n = 5000;
  auto gate = uniform(size_t(n), -20.0f, 20.0f), up = uniform(size_t(n), -20.0f, 20.0f);
  auto g_gate = upload(gate), g_up = upload(up);
  cpu_.clamp_swiglu(gate.data(), up.data(), n, 7.0f);
  gpu_->clamp_swiglu(g_gate.as<float>(), g_up.as<float>(), n, 7.0f);
  // min / max only: exact.
  expect_bit_equal(download<float>(g_gate, size_t(n)), gate, "gate");
  expect_bit_equal(download<float>(g_up, size_t(n)), up, "up");
}

TEST_F(CudaDeepSeek4Test, KvCompressMatchesCpu) {
  for (const bool overlap : {true, false}) {
    const int64_t r = overlap ? 4 : 16, d = 40, width = (overlap ? 2 : 1) * d;
    const int64_t span = (overlap ? 2 : 1) * r;
    const auto ape = uniform(size_t(r * width), -1.0f, 1.0f);
    const float* g_ape = keep(ape);
    std::vector<float> cpu_state(size_t(span * 2 * width), 0.0f);
    auto g_state = upload(cpu_state);
    // A chunk that ends inside a block, then single tokens, then another chunk.
    int64_t pos = 0;
    for (const int64_t n :
         {int64_t(3 * r + 1), int64_t(1), int64_t(1), int64_t(r - 1), int64_t(2 * r + 3)}) {
      const auto kv = uniform(size_t(n * width), -2.0f, 2.0f);
      const auto score = uniform(size_t(n * width), -3.0f, 3.0f);
      const int64_t n_blocks = (pos + n) / r - pos / r;
      std::vector<float> keys(size_t(std::max<int64_t>(n_blocks, 1) * d));
      cpu_.kv_compress(kv.data(), score.data(), ape.data(), cpu_state.data(), n, pos, r, d, overlap,
                       keys.data());
      auto g_kv = upload(kv), g_score = upload(score);
      auto g_keys = poisoned(keys.size() * 4);
      gpu_->kv_compress(g_kv.as<float>(), g_score.as<float>(), g_ape, g_state.as<float>(), n, pos,
                        r, d, overlap, g_keys.as<float>());
      const std::string what = std::string(overlap ? "overlap" : "plain") + " at " +
                               std::to_string(pos) + " + " + std::to_string(n);
      // The state: copies and one rounded add each, exact.
      expect_bit_equal(download<float>(g_state, cpu_state.size()), cpu_state, what + " state");
      if (n_blocks > 0) {
        keys.resize(size_t(n_blocks * d));
        // expf vs std::exp: each softmax weight within 2 ulp; the weighted sum of values below
        // 2 in magnitude, accumulated in double, then within a few ulp of its magnitude bound.
        expect_close(download<float>(g_keys, keys.size()), keys, 1e-5, what + " keys");
      }
      pos += n;
    }
  }
}

TEST_F(CudaDeepSeek4Test, GatherKeyCellsIsExact) {
  for (const KvElement type : {KvElement::kF16, KvElement::kF32}) {
    const int64_t capacity = 50, d = 24, n = 13;
    const size_t element = type == KvElement::kF16 ? 2 : 4;
    std::vector<uint8_t> cells(size_t(capacity * d) * element);
    for (uint8_t& b : cells) b = uint8_t(rng_() & 0x3f);  // finite halves and floats
    std::vector<int32_t> chosen(static_cast<size_t>(n));
    std::uniform_int_distribution<int32_t> any(0, int32_t(3 * capacity));  // wraps too
    for (int32_t& c : chosen) c = any(rng_);
    const KvLayerView cpu_view{type, cells.data(), cells.data(), capacity, 1, d, 0};
    std::vector<uint8_t> want(size_t(n * d) * element);
    cpu_.gather_key_cells(cpu_view, chosen.data(), n, want.data());
    auto g_cells = upload(cells), g_chosen = upload(chosen);
    auto g_out = poisoned(want.size());
    KvLayerView gpu_view = cpu_view;
    gpu_view.k = gpu_view.v = g_cells.data();
    gpu_->gather_key_cells(gpu_view, g_chosen.as<int32_t>(), n, g_out.data());
    // Byte copies.
    EXPECT_EQ(download<uint8_t>(g_out, want.size()), want)
        << (type == KvElement::kF16 ? "f16" : "f32") << " (" << where() << ")";
  }
}

}  // namespace
}  // namespace sluice::test

#else

TEST(CudaDeepSeek4Test, SkippedWithoutCuda) {
  GTEST_SKIP() << "built without the CUDA backend (SLUICE_CUDA=OFF or no nvcc)";
}

#endif
