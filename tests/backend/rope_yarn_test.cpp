// CpuBackend's RoPE with YaRN (RopeConfig::ext_factor, attn_factor, beta_fast/slow,
// n_ctx_orig) against a float64 transcription of ggml's rope_yarn, rope_yarn_ramp and
// ggml_rope_yarn_corr_dims; and the guarantee that the YaRN fields at their defaults leave
// plain RoPE bit for bit as it was computed before they existed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace sluice::test {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// ggml's formulas in double: the exact angle pos * base^(-2i/n_rot), the correction dims, the
// ramp, the blended angle and the magnitude scale.
std::vector<double> reference_rope(const std::vector<float>& x, int64_t n_tokens, int64_t n_head,
                                   int64_t head_dim, int64_t pos0, const RopeConfig& c) {
  const int64_t n_rot = c.n_rot;
  const double pi = std::numbers::pi;
  const auto corr_dim = [&](double beta) {
    return double(n_rot) * std::log(double(c.n_ctx_orig) / (beta * 2.0 * pi)) /
           (2.0 * std::log(double(c.freq_base)));
  };
  const double low = std::max(0.0, std::floor(corr_dim(c.beta_fast)));
  const double high = std::min(double(n_rot - 1), std::ceil(corr_dim(c.beta_slow)));
  std::vector<double> out(x.begin(), x.end());
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t i = 0; i < n_rot / 2; ++i) {
      const double factor = c.freq_factors != nullptr ? c.freq_factors[i] : 1.0;
      const double extrap = double(pos0 + t) *
                            std::pow(double(c.freq_base), -2.0 * double(i) / double(n_rot)) /
                            factor;
      const double interp = double(c.freq_scale) * extrap;
      double angle = interp;
      double mscale = c.attn_factor;
      if (c.ext_factor != 0.0f) {
        const double y = (double(i) - low) / std::max(0.001, high - low);
        const double mix = (1.0 - std::clamp(y, 0.0, 1.0)) * c.ext_factor;
        angle = interp * (1.0 - mix) + extrap * mix;
        mscale *= 1.0 + 0.1 * std::log(1.0 / double(c.freq_scale));
      }
      for (int64_t h = 0; h < n_head; ++h) {
        const int64_t base = (t * n_head + h) * head_dim;
        const int64_t a = base + (c.style == RopeStyle::kNormal ? 2 * i : i);
        const int64_t b = base + (c.style == RopeStyle::kNormal ? 2 * i + 1 : i + n_rot / 2);
        const double x0 = x[size_t(a)], x1 = x[size_t(b)];
        out[size_t(a)] = mscale * (x0 * std::cos(angle) - x1 * std::sin(angle));
        out[size_t(b)] = mscale * (x0 * std::sin(angle) + x1 * std::cos(angle));
      }
    }
  }
  return out;
}

// DeepSeek V3's settings (factor 40 over 4096 positions), on a partially rotated head.
RopeConfig deepseek_yarn(RopeStyle style) {
  RopeConfig c;
  c.style = style;
  c.n_rot = 64;
  c.freq_base = 10000.0f;
  c.freq_scale = 1.0f / 40.0f;
  c.ext_factor = 1.0f;
  c.attn_factor = 1.0f / (1.0f + 0.1f * std::log(40.0f));  // llama.cpp's adjusted factor
  c.beta_fast = 32.0f;
  c.beta_slow = 1.0f;
  c.n_ctx_orig = 4096;
  return c;
}

TEST(RopeYarn, MatchesFloat64Formulas) {
  cpu::CpuBackend backend(nullptr);
  const int64_t n_tokens = 3, n_head = 2, head_dim = 96;
  for (RopeStyle style : {RopeStyle::kNormal, RopeStyle::kNeox}) {
    for (int64_t pos0 : {int64_t(0), int64_t(7), int64_t(37)}) {
      const RopeConfig c = deepseek_yarn(style);
      auto x = random_floats(size_t(n_tokens * n_head * head_dim), 5);
      const auto expected = reference_rope(x, n_tokens, n_head, head_dim, pos0, c);
      backend.rope(x.data(), n_tokens, n_head, head_dim, pos0, c);
      for (size_t i = 0; i < x.size(); ++i) {
        // The float angle (theta advanced by repeated multiplication) is off by a few ulps of
        // a value up to ~40: 1e-4 absolute covers it; a wrong ramp or scale is off by far more.
        ASSERT_NEAR(x[i], expected[i], 1e-4)
            << "style " << int(style) << " pos0 " << pos0 << " element " << i;
      }
    }
  }
}

TEST(RopeYarn, RampKeepsFastPairsAndInterpolatesSlowOnes) {
  // With the magnitude scale cancelled, the first pairs (below the beta_fast correction) turn
  // by the unscaled angle and the last (above beta_slow) by the interpolated one.
  cpu::CpuBackend backend(nullptr);
  const RopeConfig c = deepseek_yarn(RopeStyle::kNormal);
  const int64_t head_dim = 64, pos = 11;
  std::vector<float> x(size_t(head_dim), 0.0f);
  for (int64_t i = 0; i < head_dim; i += 2) x[size_t(i)] = 1.0f;  // each pair starts at (1, 0)
  backend.rope(x.data(), 1, 1, head_dim, pos, c);
  // Pair 0 turns by pos itself (11 rad), as without any scaling.
  EXPECT_NEAR(x[0], std::cos(double(pos)), 1e-5);
  EXPECT_NEAR(x[1], std::sin(double(pos)), 1e-5);
  const int64_t last = head_dim / 2 - 1;
  const double theta_last = double(pos) * std::pow(10000.0, -2.0 * double(last) / 64.0) / 40.0;
  const double norm = std::hypot(x[size_t(2 * last)], x[size_t(2 * last + 1)]);
  EXPECT_NEAR(norm, 1.0, 1e-5);  // attn_factor cancels YaRN's magnitude scale
  EXPECT_NEAR(std::atan2(x[size_t(2 * last + 1)], x[size_t(2 * last)]), theta_last, 1e-6);
}

TEST(RopeYarn, DefaultsLeavePlainRopeBitIdentical) {
  // The computation as it stood before YaRN: angle = freq_scale * (theta / factor), cos and
  // sin unscaled, the rotation fused on its first product.
  cpu::CpuBackend backend(nullptr);
  const int64_t n_tokens = 4, n_head = 3, head_dim = 32, n_rot = 16, pos0 = 1000;
  const std::vector<float> factors = {1.0f, 1.5f, 2.0f, 4.0f, 8.0f, 1.0f, 1.25f, 3.0f};
  for (RopeStyle style : {RopeStyle::kNormal, RopeStyle::kNeox}) {
    RopeConfig c{style, n_rot, 500000.0f, 0.25f, factors.data()};
    auto x = random_floats(size_t(n_tokens * n_head * head_dim), 9);
    auto expected = x;
    const float theta_scale = std::pow(c.freq_base, -2.0f / float(n_rot));
    for (int64_t t = 0; t < n_tokens; ++t) {
      float theta = float(pos0 + t);
      for (int64_t i = 0; i < n_rot / 2; ++i) {
        const float angle = c.freq_scale * (theta / factors[size_t(i)]);
        const float cos_theta = std::cos(angle), sin_theta = std::sin(angle);
        for (int64_t h = 0; h < n_head; ++h) {
          float* v = expected.data() + (t * n_head + h) * head_dim;
          const int64_t a = style == RopeStyle::kNormal ? 2 * i : i;
          const int64_t b = style == RopeStyle::kNormal ? 2 * i + 1 : i + n_rot / 2;
          const float x0 = v[a], x1 = v[b];
          v[a] = std::fma(x0, cos_theta, -(x1 * sin_theta));
          v[b] = std::fma(x0, sin_theta, x1 * cos_theta);
        }
        theta *= theta_scale;
      }
    }
    backend.rope(x.data(), n_tokens, n_head, head_dim, pos0, c);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], expected[i]) << "element " << i;
  }
}

}  // namespace
}  // namespace sluice::test
