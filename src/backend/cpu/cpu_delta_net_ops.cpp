// CpuBackend's recurrent-layer ops (backend.h: causal_conv_silu, l2_norm_heads, delta_gates,
// delta_rule) in ggml's CPU forms and in the order of float operations the
// model's host loops had, so results stay bit-identical: sigmoid 1 / (1 + e^-x), softplus
// log(1 + e^x) (x above 20: x), L2 sums in double, dot products summed left to right; the
// translation unit is built with -ffp-contract=off, so nothing fuses. Value heads are
// independent, so the delta rule runs them on the pool without changing any number.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/silu.h"
#include "core/error.h"

namespace sluice::cpu {
namespace {

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}
float softplus(float x) {
  return x > 20.0f ? x : std::log(1.0f + std::exp(x));
}
float dot(const float* a, const float* b, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// One token of the delta rule on one head's state m [d (value j), d (key i)]; decay: [d] scratch,
// delta: [d] scratch.
void delta_rule_step(float* m, int64_t d, const float* q, const float* k, const float* v,
                     float beta, const float* key_gate, float head_gate, float scale, float* decay,
                     float* delta, float* o) {
  if (key_gate != nullptr) {
    for (int64_t i = 0; i < d; ++i) decay[i] = std::exp(key_gate[i]);
    for (int64_t j = 0; j < d; ++j) {
      for (int64_t i = 0; i < d; ++i) m[j * d + i] *= decay[i];
    }
  } else {
    const float factor = std::exp(head_gate);
    for (int64_t i = 0; i < d * d; ++i) m[i] *= factor;
  }
  for (int64_t j = 0; j < d; ++j) delta[j] = (v[j] - dot(m + j * d, k, d)) * beta;
  for (int64_t j = 0; j < d; ++j) {
    for (int64_t i = 0; i < d; ++i) m[j * d + i] += k[i] * delta[j];
  }
  for (int64_t j = 0; j < d; ++j) o[j] = dot(m + j * d, q, d) * scale;
}

}  // namespace

void CpuBackend::causal_conv_silu(float* x, int64_t n_tokens, int64_t channels, const float* taps,
                                  int64_t kernel, float* conv_state) {
  if (n_tokens <= 0 || channels <= 0) return;
  if (kernel < 1) fail("causal_conv_silu: kernel ", kernel, " must be at least 1");
  const int64_t held = (kernel - 1) * channels;
  conv_window_.resize(size_t(held + n_tokens * channels));
  float* window = conv_window_.data();  // [kernel - 1 + n_tokens, channels]
  std::memcpy(window, conv_state, size_t(held) * sizeof(float));
  std::memcpy(window + held, x, size_t(n_tokens * channels) * sizeof(float));
  parallel(channels, row_chunk(channels), [&](int64_t lo, int64_t hi) {
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t c = lo; c < hi; ++c) {
        const float* tap = taps + c * kernel;
        float sum = 0.0f;
        for (int64_t j = 0; j < kernel; ++j) sum += window[(t + j) * channels + c] * tap[j];
        x[t * channels + c] = sum;
      }
    }
  });
  std::memcpy(conv_state, window + n_tokens * channels, size_t(held) * sizeof(float));
  if (int64_t(conv_ones_.size()) < channels) conv_ones_.assign(size_t(channels), 1.0f);
  // Row by row: swiglu_rows's vector groups start at each row's start.
  parallel(n_tokens, row_chunk(n_tokens), [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) swiglu_rows(x + t * channels, conv_ones_.data(), 1, channels);
  });
}

void CpuBackend::l2_norm_heads(float* x, int64_t n_tokens, int64_t row_stride, int64_t n_heads,
                               int64_t head_dim, float eps, bool eps_inside) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t h = 0; h < n_heads; ++h) {
      float* head = x + t * row_stride + h * head_dim;
      double sum = 0.0;
      for (int64_t i = 0; i < head_dim; ++i) sum += double(head[i] * head[i]);
      const float scale = eps_inside ? 1.0f / std::sqrt(float(sum) + eps)
                                     : 1.0f / std::fmax(std::sqrt(float(sum)), eps);
      for (int64_t i = 0; i < head_dim; ++i) head[i] *= scale;
    }
  }
}

void CpuBackend::delta_gates(float* beta, int64_t n_beta, float* gate, int64_t n_gate,
                             int64_t n_tokens, const float* dt_bias, const float* a,
                             int64_t a_group) {
  if (a_group < 1) fail("delta_gates: a_group ", a_group, " must be at least 1");
  for (int64_t i = 0; i < n_tokens * n_beta; ++i) beta[i] = sigmoid(beta[i]);
  for (int64_t t = 0; t < n_tokens; ++t) {
    float* g = gate + t * n_gate;
    for (int64_t c = 0; c < n_gate; ++c) g[c] = softplus(g[c] + dt_bias[c]) * a[c / a_group];
  }
}

void CpuBackend::delta_rule(const DeltaRuleCall& c) {
  const int64_t d = c.head_dim, nv = c.n_v_heads;
  if (d < 1 || c.n_k_heads < 1 || nv % c.n_k_heads != 0) {
    fail("delta_rule: ", nv, " value heads cannot share ", c.n_k_heads, " key heads of ", d);
  }
  const int64_t per_key = nv / c.n_k_heads;
  constexpr int64_t kMaxHeadDim = 1024;
  if (d > kMaxHeadDim) fail("delta_rule: head_dim ", d, " is above ", kMaxHeadDim);
  parallel(nv, 1, [&](int64_t lo, int64_t hi) {
    float scratch[2 * kMaxHeadDim];  // decay and delta of one head's step
    for (int64_t h = lo; h < hi; ++h) {
      const int64_t kh = c.grouped ? h / per_key : h % c.n_k_heads;
      float* m = c.state + h * d * d;
      for (int64_t t = 0; t < c.n_tokens; ++t) {
        const float* key_gate = c.key_gate ? c.gate + (t * nv + h) * d : nullptr;
        const float head_gate = c.key_gate ? 0.0f : c.gate[t * nv + h];
        delta_rule_step(m, d, c.q + t * c.qk_stride + kh * d, c.k + t * c.qk_stride + kh * d,
                        c.v + t * c.v_stride + h * d, c.beta[t * nv + h], key_gate, head_gate,
                        c.scale, scratch, scratch + d, c.out + t * c.out_stride + h * d);
      }
    }
  });
}

}  // namespace sluice::cpu
