// Kimi delta attention in llama.cpp's order: projections, the three convolutions + SiLU, L2
// norms (eps inside the square root here, unlike the gated delta net's max(norm, eps)), decay and
// write strength, the delta rule per head (blocks/gated_delta_net's step with a decay per key
// dimension), RMS norm × sigmoid gate, output projection.
#include "model/blocks/kimi_delta_attention.h"

#include <cmath>
#include <cstring>

#include "model/blocks/gated_delta_net.h"

namespace sluice::model {
namespace {

// dst[t * dst_stride ..+ n] = src[t * n ..+ n] for t < n_tokens.
void scatter_rows(const float* src, float* dst, int64_t dst_stride, int64_t n, int64_t n_tokens) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::memcpy(dst + t * dst_stride, src + t * n, size_t(n) * sizeof(float));
  }
}

// g = softplus(f_b(f_a(x)) + dt_bias) * a[head] per channel, beta = sigmoid(beta logits).
void decay_and_strength(Backend& backend, const KdaWeights& w, const KdaShape& s, const float* x,
                        int64_t n_tokens, KdaScratch& scratch) {
  const int64_t inner = s.inner(), d = s.head_dim;
  backend.matmul(w.f_a, x, scratch.low.data(), n_tokens);
  backend.matmul(w.f_b, scratch.low.data(), scratch.gate.data(), n_tokens);
  for (int64_t t = 0; t < n_tokens; ++t) {
    float* g = scratch.gate.data() + t * inner;
    for (int64_t c = 0; c < inner; ++c) {
      g[c] = delta_net::softplus(g[c] + w.dt_bias[size_t(c)]) * w.a[size_t(c / d)];
    }
  }
  backend.matmul(w.beta, x, scratch.beta.data(), n_tokens);
  for (int64_t i = 0; i < n_tokens * s.n_head; ++i) {
    scratch.beta[size_t(i)] = delta_net::sigmoid(scratch.beta[size_t(i)]);
  }
}

}  // namespace

KdaWeights bind_kimi_delta_attention(WeightBinder& binder, int64_t layer, const KdaShape& s) {
  KdaWeights w;
  const int64_t inner = s.inner(), d = s.head_dim;
  w.q = binder.matrix(layer_tensor(layer, "attn_q.weight"), s.n_embd, inner);
  w.k = binder.matrix(layer_tensor(layer, "attn_k.weight"), s.n_embd, inner);
  w.v = binder.matrix(layer_tensor(layer, "attn_v.weight"), s.n_embd, inner);
  for (const char* name : {"ssm_conv1d_q.weight", "ssm_conv1d_k.weight", "ssm_conv1d_v.weight"}) {
    const std::vector<float> taps =
        binder.floats(layer_tensor(layer, name), {s.conv_kernel, 1, inner, 1});
    w.conv.insert(w.conv.end(), taps.begin(), taps.end());
  }
  w.f_a = binder.matrix(layer_tensor(layer, "ssm_f_a.weight"), s.n_embd, d);
  w.f_b = binder.matrix(layer_tensor(layer, "ssm_f_b.weight"), d, inner);
  w.beta = binder.matrix(layer_tensor(layer, "ssm_beta.weight"), s.n_embd, s.n_head);
  w.a = binder.floats(layer_tensor(layer, "ssm_a"), {1, s.n_head, 1, 1});
  w.dt_bias = binder.vector(layer_tensor(layer, "ssm_dt.bias"), inner);
  w.g_a = binder.matrix(layer_tensor(layer, "ssm_g_a.weight"), s.n_embd, d);
  w.g_b = binder.matrix(layer_tensor(layer, "ssm_g_b.weight"), d, inner);
  w.norm = binder.vector(layer_tensor(layer, "ssm_norm.weight"), d);
  w.out = binder.matrix(layer_tensor(layer, "attn_output.weight"), inner, s.n_embd);
  return w;
}

void KdaScratch::reserve(const KdaShape& s, int64_t n_batch) {
  const int64_t inner = s.inner(), c_n = s.conv_channels();
  proj.resize(size_t(n_batch * inner));
  qkv.resize(size_t(n_batch * c_n));
  window.resize(size_t((s.conv_kernel - 1 + n_batch) * c_n));
  low.resize(size_t(n_batch * s.head_dim));
  gate.resize(size_t(n_batch * inner));
  beta.resize(size_t(n_batch * s.n_head));
  core.resize(size_t(n_batch * inner));
  ones.assign(size_t(c_n), 1.0f);
  delta.resize(size_t(s.head_dim));
  states.reserve(size_t(n_batch));
}

void kimi_delta_attention(Backend& backend, const KdaWeights& w, const KdaShape& s,
                          std::span<const SequenceRun> sequences, int64_t layer, const float* x,
                          int64_t n_tokens, KdaScratch& scratch, float* out, const Trace& trace) {
  const int64_t inner = s.inner(), c_n = s.conv_channels(), d = s.head_dim, nh = s.n_head;
  float* qkv = scratch.qkv.data();
  const MatrixView* projections[] = {&w.q, &w.k, &w.v};
  for (int64_t part = 0; part < 3; ++part) {
    backend.matmul(*projections[part], x, scratch.proj.data(), n_tokens);
    scatter_rows(scratch.proj.data(), qkv + part * inner, c_n, inner, n_tokens);
  }
  decay_and_strength(backend, w, s, x, n_tokens, scratch);
  trace("kda_g1", layer, scratch.gate.data(), inner);
  trace("kda_beta", layer, scratch.beta.data(), nh);

  // Zeroed when a run starts its sequence; refused unless it continues the state exactly.
  scratch.states.clear();
  for (const SequenceRun& run : sequences) {
    scratch.states.push_back(run.kv->recurrent(layer, run.pos0));
    delta_net::causal_conv_silu(backend, w.conv.data(), c_n, s.conv_kernel, qkv + run.row0 * c_n,
                                run.n_tokens, scratch.states.back().conv, scratch.window.data(),
                                scratch.ones.data());
  }
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t h = 0; h < 2 * nh; ++h) {  // the q heads, then the k heads
      delta_net::l2_normalize_eps_inside(qkv + t * c_n + h * d, d, s.norm_eps);
    }
  }
  const float scale = 1.0f / std::sqrt(float(d));
  for (size_t i = 0; i < sequences.size(); ++i) {
    const SequenceRun& run = sequences[i];
    const RecurrentLayerView& state = scratch.states[i];
    for (int64_t h = 0; h < nh; ++h) {
      float* m = state.state + h * d * d;
      for (int64_t t = run.row0; t < run.row0 + run.n_tokens; ++t) {
        const float* q = qkv + t * c_n + h * d;
        delta_net::delta_rule_step(m, d, q, q + inner, q + 2 * inner,
                                   scratch.beta[size_t(t * nh + h)],
                                   scratch.gate.data() + t * inner + h * d, 0.0f, scale,
                                   scratch.delta.data(), scratch.core.data() + t * inner + h * d);
      }
    }
    *state.positions = run.pos0 + run.n_tokens;
  }
  float* core = scratch.core.data();
  trace("attn_output", layer, core, inner);

  // RMS norm per head times sigmoid(g_b(g_a(x))), then the output projection.
  backend.rms_norm(core, w.norm.data(), core, n_tokens * nh, d, s.norm_eps);
  backend.matmul(w.g_a, x, scratch.low.data(), n_tokens);
  backend.matmul(w.g_b, scratch.low.data(), scratch.gate.data(), n_tokens);
  backend.mul_sigmoid(core, scratch.gate.data(), n_tokens * inner);
  backend.matmul(w.out, core, out, n_tokens);
  trace("kda_out", layer, out, s.n_embd);
}

}  // namespace sluice::model
