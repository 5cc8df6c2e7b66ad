// CudaBackend's recurrent-layer ops (causal_conv_silu, l2_norm_heads, delta_gates, delta_rule)
// against CpuBackend's, on fresh random data each run (seed from the clock, in
// every failure message). Outputs that are not also inputs (delta_rule's out) are poisoned with
// NaN (0xff bytes) before each launch; the in-place ones start from random data that a missed
// element would keep, which the comparison catches. Tolerances:
//   - element-wise steps (the convolution's sums in tap order, SiLU, sigmoid, softplus): the same
//     float operations as the CPU; only libm's exp / log may differ, by 1 ulp on near-ties, so
//     at most 2 ulp apart; the conv state is a plain copy, bit for bit;
//   - l2_norm_heads: its double sum is a warp reduction, rounded to float — 2 ulp;
//   - delta_rule: its two d-term dot products per row are warp reductions, not left-to-right
//     sums, each off by about d · 2^-24 of the sum of the terms' magnitudes and compounding over
//     the tokens: 2e-5 absolute plus 2e-5 relative for values of order one.
// Two calls in a row check that the states continue. Skips visibly without a device.
#include <gtest/gtest.h>

#ifdef SLUICE_HAVE_CUDA

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
#include "sluice/error.h"

namespace sluice::test {
namespace {

class CudaDeltaNetTest : public CudaDeviceTest {
 protected:
  // Rows of `dim` scaled to unit L2 norm (the delta rule's q and k are L2-normalised).
  std::vector<float> unit_rows(size_t n_rows, int64_t dim) {
    std::vector<float> v = uniform(n_rows * size_t(dim), -1.0f, 1.0f);
    for (size_t r = 0; r < n_rows; ++r) {
      double sum = 0.0;
      for (int64_t i = 0; i < dim; ++i) sum += double(v[r * dim + i]) * v[r * dim + i];
      for (int64_t i = 0; i < dim; ++i) v[r * dim + i] = float(v[r * dim + i] / std::sqrt(sum));
    }
    return v;
  }

  // NaN everywhere (0xff bytes), n floats. (Hides CudaDeviceTest::poisoned, which makes
  // DeviceBuffers and counts bytes.)
  std::unique_ptr<Allocation> poisoned(size_t n) { return poisoned_allocation(n * sizeof(float)); }

  void expect_ulps(const std::vector<float>& got, const std::vector<float>& expected,
                   int64_t max_ulps, const std::string& what) {
    ASSERT_EQ(got.size(), expected.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_FALSE(std::isnan(got[i])) << what << ": element " << i << " (" << where() << ")";
      ASSERT_LE(ulp_distance(got[i], expected[i]), max_ulps)
          << what << ": element " << i << " got " << got[i] << " expected " << expected[i] << " ("
          << where() << ")";
    }
  }
  void expect_near(const std::vector<float>& got, const std::vector<float>& expected, float tol,
                   const std::string& what) {
    ASSERT_EQ(got.size(), expected.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_FALSE(std::isnan(got[i])) << what << ": element " << i << " (" << where() << ")";
      ASSERT_LE(std::fabs(got[i] - expected[i]), tol * (1.0f + std::fabs(expected[i])))
          << what << ": element " << i << " got " << got[i] << " expected " << expected[i] << " ("
          << where() << ")";
    }
  }
};

TEST_F(CudaDeltaNetTest, CausalConvSiluMatchesCpuAndContinuesItsState) {
  for (const int64_t channels : {int64_t(8), int64_t(203), int64_t(1536)}) {
    for (const int64_t kernel : {int64_t(2), int64_t(4)}) {
      const std::string what =
          "channels " + std::to_string(channels) + " kernel " + std::to_string(kernel);
      const std::vector<float> taps = uniform(size_t(channels * kernel), -1.0f, 1.0f);
      std::vector<float> state = uniform(size_t((kernel - 1) * channels), -2.0f, 2.0f);
      auto d_state = on_device(state);
      for (const int64_t n_tokens : {int64_t(5), int64_t(1)}) {  // a prefill, then a decode step
        std::vector<float> x = uniform(size_t(n_tokens * channels), -3.0f, 3.0f);
        auto d_x = on_device(x);
        cpu_.causal_conv_silu(x.data(), n_tokens, channels, taps.data(), kernel, state.data());
        gpu_->causal_conv_silu(d_x->data(), n_tokens, channels, taps.data(), kernel,
                               d_state->data());
        expect_ulps(fetch(*d_x, x.size()), x, 2, what + " x");
        expect_ulps(fetch(*d_state, state.size()), state, 0, what + " state");
      }
    }
  }
}

TEST_F(CudaDeltaNetTest, L2NormHeadsMatchesCpu) {
  const int64_t n_tokens = 7, head_dim = 96, n_heads = 6, row_stride = 8 * head_dim + 5;
  for (const bool eps_inside : {false, true}) {
    std::vector<float> x = uniform(size_t(n_tokens * row_stride), -2.0f, 2.0f);
    auto d_x = on_device(x);
    cpu_.l2_norm_heads(x.data(), n_tokens, row_stride, n_heads, head_dim, 1e-6f, eps_inside);
    gpu_->l2_norm_heads(d_x->data(), n_tokens, row_stride, n_heads, head_dim, 1e-6f, eps_inside);
    expect_ulps(fetch(*d_x, x.size()), x, 2, eps_inside ? "eps inside" : "eps outside");
  }
}

TEST_F(CudaDeltaNetTest, DeltaGatesMatchesCpu) {
  const int64_t n_tokens = 9;
  struct Form {
    int64_t n_beta, n_gate, a_group;
  };
  for (const Form f : {Form{16, 16, 1}, Form{4, 4 * 64, 64}}) {  // per head; per channel (KDA)
    std::vector<float> beta = uniform(size_t(n_tokens * f.n_beta), -6.0f, 6.0f);
    std::vector<float> gate =
        uniform(size_t(n_tokens * f.n_gate), -8.0f, 24.0f);  // both softplus arms
    const std::vector<float> dt_bias = uniform(size_t(f.n_gate), -1.0f, 1.0f);
    const std::vector<float> a = uniform(size_t(f.n_gate / f.a_group), -2.0f, -0.1f);
    auto d_beta = on_device(beta);
    auto d_gate = on_device(gate);
    cpu_.delta_gates(beta.data(), f.n_beta, gate.data(), f.n_gate, n_tokens, dt_bias.data(),
                     a.data(), f.a_group);
    gpu_->delta_gates(d_beta->data(), f.n_beta, d_gate->data(), f.n_gate, n_tokens, dt_bias.data(),
                      a.data(), f.a_group);
    expect_ulps(fetch(*d_beta, beta.size()), beta, 2, "beta");
    expect_ulps(fetch(*d_gate, gate.size()), gate, 2, "gate");
  }
}

TEST_F(CudaDeltaNetTest, DeltaRuleMatchesCpuInEveryForm) {
  struct Form {
    int64_t n_k_heads, n_v_heads, head_dim;
    bool grouped, key_gate;
  };
  const Form forms[] = {{2, 4, 128, false, false},  // qwen35: tiled key heads
                        {2, 4, 128, true, false},   // qwen3next: grouped key heads
                        {3, 3, 64, false, true},    // Kimi: a decay per key dimension
                        {1, 2, 40, true, false},    // a head size that is no multiple of 32
                        {2, 2, 200, false, true}};
  for (const Form& f : forms) {
    const int64_t d = f.head_dim, nv = f.n_v_heads;
    const int64_t qk_stride = 2 * f.n_k_heads * d + 3, v_stride = nv * d + 1, out_stride = nv * d;
    const std::string what = "heads " + std::to_string(f.n_k_heads) + "/" + std::to_string(nv) +
                             " d " + std::to_string(d) + (f.key_gate ? " key gate" : "");
    std::vector<float> state = uniform(size_t(nv * d * d), -0.5f, 0.5f);
    auto d_state = on_device(state);
    for (const int64_t n_tokens : {int64_t(9), int64_t(1)}) {  // a prefill, then a decode step
      // q and k heads as unit rows inside rows of qk_stride.
      std::vector<float> qk = uniform(size_t(n_tokens * qk_stride), -1.0f, 1.0f);
      const std::vector<float> heads = unit_rows(size_t(n_tokens * 2 * f.n_k_heads), d);
      for (int64_t t = 0; t < n_tokens; ++t) {
        std::memcpy(qk.data() + t * qk_stride, heads.data() + t * 2 * f.n_k_heads * d,
                    size_t(2 * f.n_k_heads * d) * sizeof(float));
      }
      const std::vector<float> v = uniform(size_t(n_tokens * v_stride), -1.0f, 1.0f);
      const std::vector<float> beta = uniform(size_t(n_tokens * nv), 0.05f, 0.95f);
      const std::vector<float> gate =
          uniform(size_t(n_tokens * nv * (f.key_gate ? d : 1)), -1.0f, -0.01f);
      auto d_qk = on_device(qk);
      auto d_v = on_device(v);
      auto d_beta = on_device(beta);
      auto d_gate = on_device(gate);
      std::vector<float> out(size_t(n_tokens * out_stride));
      auto d_out = poisoned(out.size());

      DeltaRuleCall call;
      call.qk_stride = qk_stride;
      call.v_stride = v_stride;
      call.out_stride = out_stride;
      call.key_gate = f.key_gate;
      call.n_tokens = n_tokens;
      call.n_k_heads = f.n_k_heads;
      call.n_v_heads = nv;
      call.head_dim = d;
      call.grouped = f.grouped;
      call.scale = 1.0f / std::sqrt(float(d));
      DeltaRuleCall on_cpu = call;
      on_cpu.q = qk.data();
      on_cpu.k = qk.data() + f.n_k_heads * d;
      on_cpu.v = v.data();
      on_cpu.beta = beta.data();
      on_cpu.gate = gate.data();
      on_cpu.state = state.data();
      on_cpu.out = out.data();
      cpu_.delta_rule(on_cpu);
      DeltaRuleCall on_gpu = call;
      on_gpu.q = d_qk->data();
      on_gpu.k = d_qk->data() + f.n_k_heads * d;
      on_gpu.v = d_v->data();
      on_gpu.beta = d_beta->data();
      on_gpu.gate = d_gate->data();
      on_gpu.state = d_state->data();
      on_gpu.out = d_out->data();
      gpu_->delta_rule(on_gpu);
      const std::string step = what + " tokens " + std::to_string(n_tokens);
      expect_near(fetch(*d_out, out.size()), out, 2e-5f, step + " out");
      expect_near(fetch(*d_state, state.size()), state, 2e-5f, step + " state");
      // Continue from the CPU's state, so the next step compares one step's error only.
      gpu_->upload(d_state->data(), state.data(), state.size() * sizeof(float));
    }
  }
}

TEST_F(CudaDeltaNetTest, DeltaRuleRefusesHeadsItCannotHold) {
  DeltaRuleCall call;
  call.n_tokens = 1;
  call.n_k_heads = call.n_v_heads = 1;
  call.head_dim = 512;
  EXPECT_THROW(gpu_->delta_rule(call), Error);
}

}  // namespace
}  // namespace sluice::test

#else

TEST(CudaDeltaNetTest, SkippedWithoutCuda) {
  GTEST_SKIP() << "built without the CUDA backend (nvcc not found)";
}

#endif
