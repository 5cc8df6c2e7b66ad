// RoPE on the device, in CpuBackend's arithmetic: theta_i = pos * theta_scale^i advanced by
// repeated float multiplication (each thread repeats the i products of its pair), divided by
// the pair's frequency factor, YaRN's ramp fused as ggml's rope_yarn, cos/sin times mscale, and
// the rotation fused as ggml's build does. Per-call constants (theta_scale, YaRN's correction
// dimensions and magnitude scale) are computed on the host with the CPU's own libm calls. The
// position comes by value or, in a recorded step, from a device slot (cuda_ops.h).
#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_math.cuh"
#include "backend/cuda/cuda_ops.h"

namespace sluice::cuda {
namespace {

constexpr int kThreads = 256;
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
};

// One block per token: the pair angles into shared memory, then every head's pairs rotated.
__global__ void rope_kernel(float* x, RopeConstants c) {
  __shared__ float cos_cache[kMaxRot / 2];
  __shared__ float sin_cache[kMaxRot / 2];
  const int64_t t = blockIdx.x;
  const int64_t half = c.n_rot / 2;
  const int64_t pos0 = c.pos0_slot != nullptr ? *c.pos0_slot : c.pos0;
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    float theta = float(pos0 + t);
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
    cos_cache[i] = __fmul_rn(libm_cosf(angle), c.mscale);
    sin_cache[i] = __fmul_rn(libm_sinf(angle), c.mscale);
  }
  __syncthreads();
  float* token = x + t * c.n_head * c.head_dim;
  for (int64_t j = threadIdx.x; j < c.n_head * half; j += blockDim.x) {
    const int64_t h = j / half;
    const int64_t i = j % half;
    float* v = token + h * c.head_dim;
    const int64_t a = c.neox ? i : 2 * i;
    const int64_t b = c.neox ? i + half : 2 * i + 1;
    const float x0 = v[a];
    const float x1 = v[b];
    v[a] = __fmaf_rn(x0, cos_cache[i], -__fmul_rn(x1, sin_cache[i]));
    v[b] = __fmaf_rn(x0, sin_cache[i], __fmul_rn(x1, cos_cache[i]));
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

void launch_rope(float* x, int64_t n_tokens, int64_t n_head, int64_t head_dim, int64_t pos0,
                 const int64_t* pos0_slot, const RopeConfig& config, cudaStream_t stream) {
  if (config.style == RopeStyle::kNone || config.n_rot == 0 || n_tokens <= 0) return;
  const int64_t n_rot = config.n_rot;
  if (n_rot > kMaxRot || n_rot > head_dim || n_rot % 2 != 0) fail("rope: bad n_rot ", n_rot);
  if (n_tokens > int64_t(0x7fffffff)) fail("rope: ", n_tokens, " tokens are too many");
  RopeConstants c;
  c.n_rot = n_rot;
  c.head_dim = head_dim;
  c.n_head = n_head;
  c.pos0 = pos0;
  c.pos0_slot = pos0_slot;
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
  rope_kernel<<<unsigned(n_tokens), kThreads, 0, stream>>>(x, c);
  check_launch("rope kernel");
}

}  // namespace sluice::cuda
