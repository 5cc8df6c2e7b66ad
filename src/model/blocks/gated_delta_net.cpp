// The gated delta net, step by step in llama.cpp's order (projections, convolution over the
// cached window, SiLU, L2 norms, decay and write strength, the delta rule, gated RMS norm,
// output projection). The element-wise functions are ggml's CPU forms: sigmoid 1 / (1 + e^-x),
// softplus log(1 + e^x) (x above 20: x), L2 norm x / max(sqrt(sum x^2), eps) with the sum in
// double; SiLU is the backend's, so it rounds as ggml's vector SiLU does.
#include "model/blocks/gated_delta_net.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "quant/dequantize.h"

namespace sluice::model {
namespace delta_net {

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}
float softplus(float x) {
  return x > 20.0f ? x : std::log(1.0f + std::exp(x));
}

void l2_normalize(float* x, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += double(x[i] * x[i]);
  const float scale = 1.0f / std::fmax(std::sqrt(float(sum)), eps);
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

void l2_normalize_eps_inside(float* x, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += double(x[i] * x[i]);
  const float scale = 1.0f / std::sqrt(float(sum) + eps);
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

void causal_conv_silu(Backend& backend, const float* taps, int64_t c_n, int64_t kernel, float* x,
                      int64_t n_tokens, float* conv_state, float* window, const float* ones) {
  const int64_t held = (kernel - 1) * c_n;
  std::memcpy(window, conv_state, size_t(held) * sizeof(float));
  std::memcpy(window + held, x, size_t(n_tokens * c_n) * sizeof(float));
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t c = 0; c < c_n; ++c) {
      const float* tap = taps + c * kernel;
      float sum = 0.0f;
      for (int64_t j = 0; j < kernel; ++j) sum += window[(t + j) * c_n + c] * tap[j];
      x[t * c_n + c] = sum;
    }
  }
  std::memcpy(conv_state, window + n_tokens * c_n, size_t(held) * sizeof(float));
  for (int64_t t = 0; t < n_tokens; ++t) {
    backend.glu(GluActivation::kSilu, x + t * c_n, ones, 1, c_n);
  }
}

namespace {
float dot(const float* a, const float* b, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}
}  // namespace

void delta_rule_step(float* m, int64_t d, const float* q, const float* k, const float* v,
                     float beta, const float* key_gate, float head_gate, float scale, float* delta,
                     float* o) {
  if (key_gate != nullptr) {
    for (int64_t i = 0; i < d; ++i) delta[i] = std::exp(key_gate[i]);
    for (int64_t j = 0; j < d; ++j) {
      for (int64_t i = 0; i < d; ++i) m[j * d + i] *= delta[i];
    }
  } else {
    const float decay = std::exp(head_gate);
    for (int64_t i = 0; i < d * d; ++i) m[i] *= decay;
  }
  for (int64_t j = 0; j < d; ++j) delta[j] = (v[j] - dot(m + j * d, k, d)) * beta;
  for (int64_t j = 0; j < d; ++j) {
    for (int64_t i = 0; i < d; ++i) m[j * d + i] += k[i] * delta[j];
  }
  for (int64_t j = 0; j < d; ++j) o[j] = dot(m + j * d, q, d) * scale;
}

}  // namespace delta_net

namespace {

using delta_net::sigmoid;
using delta_net::softplus;

// A small float tensor read whole (the convolution kernel), refusing quantized types.
std::vector<float> float_tensor(WeightBinder& binder, const std::string& name, int64_t n_cols,
                                int64_t n_rows) {
  const MatrixView view = binder.matrix(name, n_cols, n_rows);
  if (!traits_of(view.type).is_float) {
    fail("tensor '", name, "' has type ", qtype_name(view.type), ", expected floating point");
  }
  std::vector<float> values(size_t(n_cols * n_rows));
  dequantize_row(view.type, view.data, values.data(), n_cols * n_rows);
  return values;
}

// beta = sigmoid(beta logits), g = softplus(alpha + dt_bias) * a, for every token and value head.
void decay_and_strength(Backend& backend, const GatedDeltaNetWeights& w,
                        const GatedDeltaNetShape& s, const float* x, int64_t n_tokens,
                        GatedDeltaNetScratch& scratch) {
  const int64_t nv = s.n_v_heads;
  float* beta = scratch.beta.data();
  float* gate = scratch.gate.data();
  if (s.joint_beta_alpha) {
    // Per key head: the betas then the alphas of the value heads that share it.
    backend.matmul(w.beta_alpha, x, scratch.ba.data(), n_tokens);
    const int64_t per_key = nv / s.n_k_heads;
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* ba = scratch.ba.data() + t * 2 * nv;
      for (int64_t h = 0; h < nv; ++h) {
        const int64_t group = h / per_key, j = h % per_key;
        beta[t * nv + h] = ba[group * 2 * per_key + j];
        gate[t * nv + h] = ba[group * 2 * per_key + per_key + j];
      }
    }
  } else {
    backend.matmul(w.beta, x, beta, n_tokens);
    backend.matmul(w.alpha, x, gate, n_tokens);
  }
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t h = 0; h < nv; ++h) {
      beta[t * nv + h] = sigmoid(beta[t * nv + h]);
      gate[t * nv + h] = softplus(gate[t * nv + h] + w.dt_bias[size_t(h)]) * w.a[size_t(h)];
    }
  }
}

// The causal depthwise convolution of one run's rows of qkv (in place) and SiLU.
void convolve(Backend& backend, const GatedDeltaNetWeights& w, const GatedDeltaNetShape& s,
              float* qkv, int64_t n_tokens, float* conv_state, GatedDeltaNetScratch& scratch) {
  delta_net::causal_conv_silu(backend, w.conv.data(), s.conv_channels(), s.conv_kernel, qkv,
                              n_tokens, conv_state, scratch.window.data(), scratch.ones.data());
}

// The gated delta rule over one run's tokens for every value head, from and into `state`
// ([n_v_heads, head_dim (value), head_dim (key)]); core receives [n_tokens, value_dim].
void delta_rule(const GatedDeltaNetShape& s, const float* qkv, const float* beta, const float* gate,
                int64_t n_tokens, float* state, float* core, float* delta) {
  const int64_t d = s.head_dim, nv = s.n_v_heads, c_n = s.conv_channels();
  const int64_t per_key = nv / s.n_k_heads;
  const float scale = 1.0f / std::sqrt(float(d));
  for (int64_t h = 0; h < nv; ++h) {
    const int64_t kh = s.sharing == KeyHeadSharing::kTiled ? h % s.n_k_heads : h / per_key;
    float* m = state + h * d * d;  // row j: how value j reads each key dimension
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* q = qkv + t * c_n + kh * d;
      const float* k = q + s.key_dim();
      const float* v = qkv + t * c_n + 2 * s.key_dim() + h * d;
      delta_net::delta_rule_step(m, d, q, k, v, beta[t * nv + h], nullptr, gate[t * nv + h], scale,
                                 delta, core + t * s.value_dim() + h * d);
    }
  }
}

}  // namespace

GatedDeltaNetWeights bind_gated_delta_net(WeightBinder& binder, int64_t layer,
                                          const GatedDeltaNetShape& s) {
  GatedDeltaNetWeights w;
  const int64_t nv = s.n_v_heads;
  w.qkv = binder.matrix(layer_tensor(layer, "attn_qkv.weight"), s.n_embd, s.conv_channels());
  w.z = binder.matrix(layer_tensor(layer, "attn_gate.weight"), s.n_embd, s.value_dim());
  if (s.joint_beta_alpha) {
    w.beta_alpha = binder.matrix(layer_tensor(layer, "ssm_ba.weight"), s.n_embd, 2 * nv);
  } else {
    w.beta = binder.matrix(layer_tensor(layer, "ssm_beta.weight"), s.n_embd, nv);
    w.alpha = binder.matrix(layer_tensor(layer, "ssm_alpha.weight"), s.n_embd, nv);
  }
  w.conv = float_tensor(binder, layer_tensor(layer, "ssm_conv1d.weight"), s.conv_kernel,
                        s.conv_channels());
  w.dt_bias = binder.vector(layer_tensor(layer, "ssm_dt.bias"), nv);
  w.a = binder.vector(layer_tensor(layer, "ssm_a"), nv);
  w.norm = binder.vector(layer_tensor(layer, "ssm_norm.weight"), s.head_dim);
  w.out = binder.matrix(layer_tensor(layer, "ssm_out.weight"), s.value_dim(), s.n_embd);
  return w;
}

void GatedDeltaNetScratch::reserve(const GatedDeltaNetShape& s, int64_t n_batch) {
  const int64_t c_n = s.conv_channels();
  qkv.resize(size_t(n_batch * c_n));
  window.resize(size_t((s.conv_kernel - 1 + n_batch) * c_n));
  z.resize(size_t(n_batch * s.value_dim()));
  ba.resize(size_t(n_batch * 2 * s.n_v_heads));
  beta.resize(size_t(n_batch * s.n_v_heads));
  gate.resize(size_t(n_batch * s.n_v_heads));
  core.resize(size_t(n_batch * s.value_dim()));
  ones.assign(size_t(c_n), 1.0f);
  delta.resize(size_t(s.head_dim));
  states.reserve(size_t(n_batch));  // at most one run per token
}

void gated_delta_net(Backend& backend, const GatedDeltaNetWeights& w, const GatedDeltaNetShape& s,
                     std::span<const SequenceRun> sequences, int64_t layer, const float* x,
                     int64_t n_tokens, GatedDeltaNetScratch& scratch, float* out,
                     const Trace& trace) {
  const int64_t c_n = s.conv_channels(), d = s.head_dim;
  float* qkv = scratch.qkv.data();
  backend.matmul(w.qkv, x, qkv, n_tokens);
  trace("linear_attn_qkv_mixed", layer, qkv, c_n);
  backend.matmul(w.z, x, scratch.z.data(), n_tokens);
  trace("z", layer, scratch.z.data(), s.value_dim());
  decay_and_strength(backend, w, s, x, n_tokens, scratch);
  trace("gate", layer, scratch.gate.data(), s.n_v_heads);

  // Zeroed when a run starts its sequence; refused unless it continues the state exactly.
  scratch.states.clear();
  for (const SequenceRun& run : sequences) {
    scratch.states.push_back(run.kv->recurrent(layer, run.pos0));
    convolve(backend, w, s, qkv + run.row0 * c_n, run.n_tokens, scratch.states.back().conv,
             scratch);
  }
  trace("conv_output_silu", layer, qkv, c_n);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t h = 0; h < 2 * s.n_k_heads; ++h) {  // the q heads, then the k heads
      delta_net::l2_normalize(qkv + t * c_n + h * d, d, s.norm_eps);
    }
  }
  for (size_t i = 0; i < sequences.size(); ++i) {
    const SequenceRun& run = sequences[i];
    const RecurrentLayerView& state = scratch.states[i];
    delta_rule(s, qkv + run.row0 * c_n, scratch.beta.data() + run.row0 * s.n_v_heads,
               scratch.gate.data() + run.row0 * s.n_v_heads, run.n_tokens, state.state,
               scratch.core.data() + run.row0 * s.value_dim(), scratch.delta.data());
    *state.positions = run.pos0 + run.n_tokens;
  }
  float* core = scratch.core.data();
  trace("attn_output", layer, core, s.value_dim());

  // RMS norm per value head, times SiLU(z), then the output projection.
  backend.rms_norm(core, w.norm.data(), core, n_tokens * s.n_v_heads, d, s.norm_eps);
  backend.glu(GluActivation::kSilu, scratch.z.data(), core, n_tokens * s.n_v_heads, d);
  trace("final_output", layer, scratch.z.data(), s.value_dim());
  backend.matmul(w.out, scratch.z.data(), out, n_tokens);
  trace("linear_attn_out", layer, out, s.n_embd);
}

}  // namespace sluice::model
