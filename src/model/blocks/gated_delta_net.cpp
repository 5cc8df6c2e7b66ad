// The gated delta net, step by step in llama.cpp's order (projections, convolution over the
// cached window, SiLU, L2 norms, decay and write strength, the delta rule, gated RMS norm,
// output projection), each step a backend op whose CPU form is ggml's (backend.h's recurrent-layer
// ops: sigmoid 1 / (1 + e^-x), softplus log(1 + e^x) (x above 20: x), L2 norm
// x / max(sqrt(sum x^2), eps) with the sum in double; SiLU as the backend's GLU rounds it).
#include "model/blocks/gated_delta_net.h"

#include <cmath>

#include "core/error.h"
#include "quant/dequantize.h"

namespace sluice::model {
namespace {

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

// The projections that read x: qkv, z and beta / alpha (one matmul_shared_input, so a backend
// converts x once), then beta = sigmoid(beta logits), g = softplus(alpha + dt_bias) * a.
void project(Backend& backend, const GatedDeltaNetWeights& w, const GatedDeltaNetShape& s,
             const float* x, int64_t n_tokens, GatedDeltaNetScratch& scratch) {
  const int64_t nv = s.n_v_heads;
  if (s.joint_beta_alpha) {
    const MatrixView ws[] = {w.qkv, w.z, w.beta_alpha};
    float* const ys[] = {scratch.qkv.data(), scratch.z.data(), scratch.ba.data()};
    backend.matmul_shared_input(ws, ys, 3, x, n_tokens);
    // Per key head: the betas then the alphas of the value heads that share it — as rows of
    // [n_tokens * n_k_heads, 2 per_key], each half moved into rows of [.., per_key].
    const int64_t per_key = nv / s.n_k_heads, rows = n_tokens * s.n_k_heads;
    backend.copy_strided_rows(scratch.ba.data(), 2 * per_key, scratch.beta.data(), per_key, rows,
                              per_key);
    backend.copy_strided_rows(scratch.ba.data() + per_key, 2 * per_key, scratch.gate.data(),
                              per_key, rows, per_key);
  } else {
    const MatrixView ws[] = {w.qkv, w.z, w.beta, w.alpha};
    float* const ys[] = {scratch.qkv.data(), scratch.z.data(), scratch.beta.data(),
                         scratch.gate.data()};
    backend.matmul_shared_input(ws, ys, 4, x, n_tokens);
  }
  backend.delta_gates(scratch.beta.data(), nv, scratch.gate.data(), nv, n_tokens, w.dt_bias.data(),
                      w.a.data(), 1);
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

void GatedDeltaNetScratch::reserve(Backend& backend, const GatedDeltaNetShape& s, int64_t n_batch) {
  qkv.resize(backend, size_t(n_batch * s.conv_channels()));
  z.resize(backend, size_t(n_batch * s.value_dim()));
  if (s.joint_beta_alpha) ba.resize(backend, size_t(n_batch * 2 * s.n_v_heads));
  beta.resize(backend, size_t(n_batch * s.n_v_heads));
  gate.resize(backend, size_t(n_batch * s.n_v_heads));
  core.resize(backend, size_t(n_batch * s.value_dim()));
  states.reserve(size_t(n_batch));  // at most one run per token
}

void gated_delta_net(Backend& backend, const GatedDeltaNetWeights& w, const GatedDeltaNetShape& s,
                     std::span<const SequenceRun> sequences, int64_t layer, const float* x,
                     int64_t n_tokens, GatedDeltaNetScratch& scratch, float* out,
                     const Trace& trace) {
  const int64_t c_n = s.conv_channels(), d = s.head_dim, nv = s.n_v_heads;
  float* qkv = scratch.qkv.data();
  project(backend, w, s, x, n_tokens, scratch);
  trace("linear_attn_qkv_mixed", layer, qkv, c_n);
  trace("z", layer, scratch.z.data(), s.value_dim());
  trace("gate", layer, scratch.gate.data(), nv);

  // Zeroed when a run starts its sequence; refused unless it continues the state exactly.
  scratch.states.clear();
  for (const SequenceRun& run : sequences) {
    scratch.states.push_back(run.kv->recurrent(layer, run.pos0));
    backend.causal_conv_silu(qkv + run.row0 * c_n, run.n_tokens, c_n, w.conv.data(), s.conv_kernel,
                             scratch.states.back().conv);
  }
  trace("conv_output_silu", layer, qkv, c_n);
  // The q heads, then the k heads, of every row.
  backend.l2_norm_heads(qkv, n_tokens, c_n, 2 * s.n_k_heads, d, s.norm_eps, /*eps_inside=*/false);
  for (size_t i = 0; i < sequences.size(); ++i) {
    const SequenceRun& run = sequences[i];
    const RecurrentLayerView& state = scratch.states[i];
    DeltaRuleCall call;
    call.q = qkv + run.row0 * c_n;
    call.k = call.q + s.key_dim();
    call.v = call.q + 2 * s.key_dim();
    call.qk_stride = call.v_stride = c_n;
    call.beta = scratch.beta.data() + run.row0 * nv;
    call.gate = scratch.gate.data() + run.row0 * nv;
    call.state = state.state;
    call.out = scratch.core.data() + run.row0 * s.value_dim();
    call.out_stride = s.value_dim();
    call.n_tokens = run.n_tokens;
    call.n_k_heads = s.n_k_heads;
    call.n_v_heads = nv;
    call.head_dim = d;
    call.grouped = s.sharing == KeyHeadSharing::kGrouped;
    call.scale = 1.0f / std::sqrt(float(d));
    backend.delta_rule(call);
    *state.positions = run.pos0 + run.n_tokens;
  }
  float* core = scratch.core.data();
  trace("attn_output", layer, core, s.value_dim());

  // RMS norm per value head, times SiLU(z), then the output projection.
  backend.rms_norm(core, w.norm.data(), core, n_tokens * nv, d, s.norm_eps);
  backend.glu(GluActivation::kSilu, scratch.z.data(), core, n_tokens * nv, d);
  trace("final_output", layer, scratch.z.data(), s.value_dim());
  backend.matmul(w.out, scratch.z.data(), out, n_tokens);
  trace("linear_attn_out", layer, out, s.n_embd);
}

}  // namespace sluice::model
