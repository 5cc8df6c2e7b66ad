// The cos / sin by which RoPE turns a token's dimension pairs, as ggml's CPU ops compute them:
// theta_i = pos * base^(-2i / n_rot) advanced by float multiplication, divided by the pair's
// frequency factor, ggml's rope_yarn for YaRN, libm's cosf / sinf times the magnitude scale.
// CpuBackend::rope rotates with them; a GPU rounding as the CPU does (--cpu-rounding) takes its
// table from here, since the device's correctly rounded cos / sin differ from glibc's in the last
// bit of some angles.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace sluice::cpu {

constexpr int64_t kMaxRopeRot = 1024;

// A call's constants; fails on a bad n_rot or YaRN without the original context length.
struct RopeAngleConstants {
  float theta_scale = 1.0f;
  float yarn_dims[2] = {0.0f, 0.0f};  // ggml_rope_yarn_corr_dims (YaRN only)
};
RopeAngleConstants rope_angle_constants(const RopeConfig& config);

// cos_out[i], sin_out[i] for the n_rot / 2 pairs of a token at `pos`.
void rope_angles(const RopeConfig& config, const RopeAngleConstants& k, int64_t pos, float* cos_out,
                 float* sin_out);

}  // namespace sluice::cpu
