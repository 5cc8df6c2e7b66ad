// RoPE on the device, in CpuBackend's arithmetic (the angle and rotation: cuda_rope.cuh; each
// thread repeats the i products of its pair). Per-call constants (theta_scale, YaRN's correction
// dimensions and magnitude scale) are computed on the host with the CPU's own libm calls. The
// position comes by value or, in a recorded step, from a device slot (cuda_ops.h).
#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_math.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_rope.cuh"

namespace sluice::cuda {
namespace {

constexpr int kThreads = 256;

// One block per token: the pair angles into shared memory, then every head's pairs rotated.
__global__ void rope_kernel(float* x, RopeConstants c) {
  __shared__ float cos_cache[kMaxRot / 2];
  __shared__ float sin_cache[kMaxRot / 2];
  const int64_t t = blockIdx.x;
  const int64_t half = c.n_rot / 2;
  const int64_t pos = rope_position(c) + t;
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    rope_cos_sin(c, pos, i, &cos_cache[i], &sin_cache[i]);
  }
  __syncthreads();
  float* token = x + t * c.n_head * c.head_dim;
  for (int64_t j = threadIdx.x; j < c.n_head * half; j += blockDim.x) {
    const int64_t h = j / half;
    const int64_t i = j % half;
    float* v = token + h * c.head_dim;
    int64_t a, b;
    rope_pair(c, i, &a, &b);
    rope_rotate(v[a], v[b], cos_cache[i], sin_cache[i], &v[a], &v[b]);
  }
}

// ggml_rope_yarn_corr_dims, as cpu_backend.cpp computes it.
// (kPi, which C++17 lacks, is this same float.)
void yarn_corr_dims(int64_t n_rot, const RopeConfig& c, float dims[2]) {
  constexpr float kPi = 3.14159265358979323846f;
  const auto corr_dim = [&](float beta) {
    return float(n_rot) * std::log(float(c.n_ctx_orig) / (beta * 2.0f * kPi)) /
           (2.0f * std::log(c.freq_base));
  };
  dims[0] = std::max(0.0f, std::floor(corr_dim(c.beta_fast)));
  dims[1] = std::min(float(n_rot - 1), std::ceil(corr_dim(c.beta_slow)));
}

}  // namespace

RopeConstants rope_constants(int64_t n_head, int64_t head_dim, int64_t pos0,
                             const int64_t* pos0_slot, const RopeConfig& config,
                             const float* cpu_angles) {
  RopeConstants c;
  c.cpu_angles = cpu_angles;
  c.n_head = n_head;
  c.head_dim = head_dim;
  c.pos0 = pos0;
  c.pos0_slot = pos0_slot;
  if (config.style == RopeStyle::kNone || config.n_rot == 0) return c;  // n_rot 0: no rotation
  const int64_t n_rot = config.n_rot;
  if (n_rot > kMaxRot || n_rot > head_dim || n_rot % 2 != 0) fail("rope: bad n_rot ", n_rot);
  c.n_rot = n_rot;
  c.neox = config.style == RopeStyle::kNeox;
  c.theta_scale = std::pow(config.freq_base, -2.0f / float(n_rot));
  c.freq_scale = config.freq_scale;
  c.freq_factors = config.freq_factors;
  c.mscale = config.attn_factor;
  if (config.ext_factor != 0.0f) {
    if (config.n_ctx_orig <= 0) fail("rope: YaRN needs the original context length");
    float dims[2];
    yarn_corr_dims(n_rot, config, dims);
    c.yarn = true;
    c.ext_factor = config.ext_factor;
    c.corr_low = dims[0];
    c.ramp_width = std::max(0.001f, dims[1] - dims[0]);
    c.mscale *= std::fma(0.1f, std::log(1.0f / config.freq_scale), 1.0f);
  }
  return c;
}

void launch_rope(float* x, int64_t n_tokens, int64_t n_head, int64_t head_dim, int64_t pos0,
                 const int64_t* pos0_slot, const RopeConfig& config, const float* cpu_angles,
                 cudaStream_t stream) {
  if (config.style == RopeStyle::kNone || config.n_rot == 0 || n_tokens <= 0) return;
  if (n_tokens > int64_t(0x7fffffff)) fail("rope: ", n_tokens, " tokens are too many");
  const RopeConstants c = rope_constants(n_head, head_dim, pos0, pos0_slot, config, cpu_angles);
  rope_kernel<<<unsigned(n_tokens), kThreads, 0, stream>>>(x, c);
  check_launch("rope kernel");
}

}  // namespace sluice::cuda
