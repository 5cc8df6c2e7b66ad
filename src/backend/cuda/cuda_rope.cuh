// Internal to backend/cuda: RoPE's per-call constants and its per-pair angle, shared by
// rope_kernel (cuda_rope.cu) and the fused attention-inputs kernel (cuda_attention_inputs.cu) so
// both rotate with the same bits: theta_i = pos * theta_scale^i by repeated float multiplication,
// divided by the pair's frequency factor, YaRN's ramp as ggml's rope_yarn, cos/sin (libm, in
// double) times mscale, and the rotation fused as ggml's build does.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.h"
#include "backend/cuda/cuda_math.cuh"

namespace sluice::cuda {

constexpr int64_t kMaxRot = 1024;  // as the CPU backend

struct RopeConstants {
  int64_t n_rot = 0;
  int64_t head_dim = 0;
  int64_t n_head = 0;
  int64_t pos0 = 0;
  const int64_t* pos0_slot = nullptr;  // not nullptr: the position is read from here
  bool neox = false;
  float theta_scale = 1.0f;
  float freq_scale = 1.0f;
  const float* freq_factors = nullptr;
  bool yarn = false;  // ext_factor != 0
  float ext_factor = 0.0f;
  float corr_low = 0.0f;    // YaRN's dims[0]
  float ramp_width = 1.0f;  // max(0.001, dims[1] - dims[0])
  float mscale = 1.0f;
  // --cpu-rounding: the CPU's angles, [position][n_rot / 2] (cos, sin) (cuda_rope_angles.h),
  // read instead of computed; nullptr: computed.
  const float* cpu_angles = nullptr;
};

// The constants of a call (host libm, as the CPU backend computes them); fails on a bad n_rot.
// config.freq_factors must already be a device pointer. n_rot 0: nothing rotates.
RopeConstants rope_constants(int64_t n_head, int64_t head_dim, int64_t pos0,
                             const int64_t* pos0_slot, const RopeConfig& config,
                             const float* cpu_angles);

__device__ __forceinline__ int64_t rope_position(const RopeConstants& c) {
  return c.pos0_slot != nullptr ? *c.pos0_slot : c.pos0;
}

// cos and sin of pair i at position pos.
__device__ __forceinline__ void rope_cos_sin(const RopeConstants& c, int64_t pos, int64_t i,
                                             float* cos_out, float* sin_out) {
  if (c.cpu_angles != nullptr) {
    const float* angle = c.cpu_angles + (pos * (c.n_rot / 2) + i) * 2;
    *cos_out = angle[0], *sin_out = angle[1];
    return;
  }
  float theta = float(pos);
  for (int64_t k = 0; k < i; ++k) theta = __fmul_rn(theta, c.theta_scale);
  const float factor = c.freq_factors != nullptr ? c.freq_factors[i] : 1.0f;
  const float theta_extrap = __fdiv_rn(theta, factor);
  const float theta_interp = __fmul_rn(c.freq_scale, theta_extrap);
  float angle = theta_interp;
  if (c.yarn) {
    const float y = __fdiv_rn(__fsub_rn(float(i), c.corr_low), c.ramp_width);
    const float ramp_mix = __fmul_rn(__fsub_rn(1.0f, fminf(1.0f, fmaxf(0.0f, y))), c.ext_factor);
    angle = __fmaf_rn(theta_interp, __fsub_rn(1.0f, ramp_mix), __fmul_rn(theta_extrap, ramp_mix));
  }
  *cos_out = __fmul_rn(libm_cosf(angle), c.mscale);
  *sin_out = __fmul_rn(libm_sinf(angle), c.mscale);
}

// The two elements pair i of a head rotates (adjacent, or halves for NeoX).
__device__ __forceinline__ void rope_pair(const RopeConstants& c, int64_t i, int64_t* a,
                                          int64_t* b) {
  const int64_t half = c.n_rot / 2;
  *a = c.neox ? i : 2 * i;
  *b = c.neox ? i + half : 2 * i + 1;
}

__device__ __forceinline__ void rope_rotate(float x0, float x1, float cos_v, float sin_v, float* y0,
                                            float* y1) {
  *y0 = __fmaf_rn(x0, cos_v, -__fmul_rn(x1, sin_v));
  *y1 = __fmaf_rn(x0, sin_v, __fmul_rn(x1, cos_v));
}

}  // namespace sluice::cuda
