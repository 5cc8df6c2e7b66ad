// rope_angles: ggml's RoPE angle arithmetic (see the header).
#include "backend/cpu/rope_angles.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace sluice::cpu {
namespace {

// ggml_rope_yarn_corr_dims: the first and last dimension pair YaRN ramps between — the pairs
// that turn beta_fast resp. beta_slow times over the original context.
void yarn_corr_dims(int64_t n_rot, const RopeConfig& c, float dims[2]) {
  const auto corr_dim = [&](float beta) {
    return float(n_rot) *
           std::log(float(c.n_ctx_orig) / (beta * 2.0f * std::numbers::pi_v<float>)) /
           (2.0f * std::log(c.freq_base));
  };
  dims[0] = std::max(0.0f, std::floor(corr_dim(c.beta_fast)));
  dims[1] = std::min(float(n_rot - 1), std::ceil(corr_dim(c.beta_slow)));
}

// ggml's rope_yarn for pair i: the interpolated angle, blended toward the original one below
// the ramp, and the magnitude scale, as its build computes them (a*b + c*d fused on a*b).
void yarn_angle(float theta_extrap, int64_t i, const RopeConfig& c, const float dims[2],
                float* angle, float* mscale) {
  const float theta_interp = c.freq_scale * theta_extrap;
  *angle = theta_interp;
  *mscale = c.attn_factor;
  if (c.ext_factor == 0.0f) return;
  const float y = (float(i) - dims[0]) / std::max(0.001f, dims[1] - dims[0]);
  const float ramp_mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * c.ext_factor;
  *angle = std::fma(theta_interp, 1.0f - ramp_mix, theta_extrap * ramp_mix);
  *mscale *= std::fma(0.1f, std::log(1.0f / c.freq_scale), 1.0f);
}

}  // namespace

RopeAngleConstants rope_angle_constants(const RopeConfig& config) {
  const int64_t n_rot = config.n_rot;
  if (n_rot > kMaxRopeRot || n_rot < 0 || n_rot % 2 != 0) fail("rope: bad n_rot ", n_rot);
  RopeAngleConstants k;
  k.theta_scale = std::pow(config.freq_base, -2.0f / float(n_rot));
  if (config.ext_factor != 0.0f) {
    if (config.n_ctx_orig <= 0) fail("rope: YaRN needs the original context length");
    yarn_corr_dims(n_rot, config, k.yarn_dims);
  }
  return k;
}

void rope_angles(const RopeConfig& config, const RopeAngleConstants& k, int64_t pos, float* cos_out,
                 float* sin_out) {
  float theta = float(pos);
  for (int64_t i = 0; i < config.n_rot / 2; ++i) {
    const float factor = config.freq_factors != nullptr ? config.freq_factors[i] : 1.0f;
    float angle = 0.0f;
    float mscale = 1.0f;
    yarn_angle(theta / factor, i, config, k.yarn_dims, &angle, &mscale);
    // mscale is exactly 1 without YaRN or an attention factor: the products change nothing.
    cos_out[i] = std::cos(angle) * mscale;
    sin_out[i] = std::sin(angle) * mscale;
    theta *= k.theta_scale;
  }
}

}  // namespace sluice::cpu
