// Kimi delta attention in llama.cpp's order: projections, the three convolutions + SiLU, L2
// norms (eps inside the square root here, unlike the gated delta net's max(norm, eps)), decay and
// write strength, the delta rule per head (Backend::delta_rule with a decay per key dimension),
// RMS norm × sigmoid gate, output projection — every step a backend op.
#include "model/blocks/kimi_delta_attention.h"

#include <cmath>

namespace sluice::model {

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

void KdaScratch::reserve(Backend& backend, const KdaShape& s, int64_t n_batch) {
  const int64_t inner = s.inner();
  proj.resize(backend, size_t(3 * n_batch * inner));
  qkv.resize(backend, size_t(n_batch * s.conv_channels()));
  low.resize(backend, size_t(n_batch * s.head_dim));
  low_gate.resize(backend, size_t(n_batch * s.head_dim));
  gate.resize(backend, size_t(n_batch * inner));
  out_gate.resize(backend, size_t(n_batch * inner));
  beta.resize(backend, size_t(n_batch * s.n_head));
  core.resize(backend, size_t(n_batch * inner));
  states.reserve(size_t(n_batch));
}

void kimi_delta_attention(Backend& backend, const KdaWeights& w, const KdaShape& s,
                          std::span<const SequenceRun> sequences, int64_t layer, const float* x,
                          int64_t n_tokens, KdaScratch& scratch, float* out, const Trace& trace) {
  const int64_t inner = s.inner(), c_n = s.conv_channels(), d = s.head_dim, nh = s.n_head;
  float* qkv = scratch.qkv.data();
  const int64_t n_batch = int64_t(scratch.proj.size()) / (3 * inner);
  // Everything that reads x at once (a backend converts x once): q, k, v, the low-rank halves
  // of the decay and of the output gate, and beta.
  float* proj = scratch.proj.data();
  const MatrixView ws[] = {w.q, w.k, w.v, w.f_a, w.g_a, w.beta};
  float* const ys[] = {proj,
                       proj + n_batch * inner,
                       proj + 2 * n_batch * inner,
                       scratch.low.data(),
                       scratch.low_gate.data(),
                       scratch.beta.data()};
  backend.matmul_shared_input(ws, ys, 6, x, n_tokens);
  for (int64_t part = 0; part < 3; ++part) {  // q | k | v side by side in each row
    backend.copy_strided_rows(ys[part], inner, qkv + part * inner, c_n, n_tokens, inner);
  }
  // g = softplus(f_b(f_a(x)) + dt_bias) * a[head] per channel, beta = sigmoid(beta logits).
  backend.matmul(w.f_b, scratch.low.data(), scratch.gate.data(), n_tokens);
  backend.delta_gates(scratch.beta.data(), nh, scratch.gate.data(), inner, n_tokens,
                      w.dt_bias.data(), w.a.data(), d);
  trace("kda_g1", layer, scratch.gate.data(), inner);
  trace("kda_beta", layer, scratch.beta.data(), nh);

  // Zeroed when a run starts its sequence; refused unless it continues the state exactly.
  scratch.states.clear();
  for (const SequenceRun& run : sequences) {
    scratch.states.push_back(run.kv->recurrent(layer, run.pos0));
    backend.causal_conv_silu(qkv + run.row0 * c_n, run.n_tokens, c_n, w.conv.data(), s.conv_kernel,
                             scratch.states.back().conv);
  }
  // The q heads, then the k heads, of every row.
  backend.l2_norm_heads(qkv, n_tokens, c_n, 2 * nh, d, s.norm_eps, /*eps_inside=*/true);
  for (size_t i = 0; i < sequences.size(); ++i) {
    const SequenceRun& run = sequences[i];
    const RecurrentLayerView& state = scratch.states[i];
    DeltaRuleCall call;
    call.q = qkv + run.row0 * c_n;
    call.k = call.q + inner;
    call.v = call.q + 2 * inner;
    call.qk_stride = call.v_stride = c_n;
    call.beta = scratch.beta.data() + run.row0 * nh;
    call.gate = scratch.gate.data() + run.row0 * inner;
    call.key_gate = true;
    call.state = state.state;
    call.out = scratch.core.data() + run.row0 * inner;
    call.out_stride = inner;
    call.n_tokens = run.n_tokens;
    call.n_k_heads = call.n_v_heads = nh;
    call.head_dim = d;
    call.scale = 1.0f / std::sqrt(float(d));
    backend.delta_rule(call);
    *state.positions = run.pos0 + run.n_tokens;
  }
  float* core = scratch.core.data();
  trace("attn_output", layer, core, inner);

  // RMS norm per head times sigmoid(g_b(g_a(x))), then the output projection.
  backend.rms_norm(core, w.norm.data(), core, n_tokens * nh, d, s.norm_eps);
  backend.matmul(w.g_b, scratch.low_gate.data(), scratch.out_gate.data(), n_tokens);
  backend.mul_sigmoid(core, scratch.out_gate.data(), n_tokens * inner);
  backend.matmul(w.out, core, out, n_tokens);
  trace("kda_out", layer, out, s.n_embd);
}

}  // namespace sluice::model
