// The self-attention block. Order of operations follows llama.cpp's graphs (norm before RoPE,
// bias right after its projection, the gate applied before the output projection).
#include "model/blocks/attention.h"

namespace sluice::model {
namespace {

// attn [n_tokens, n_head*dv] *= act(gate), gate [n_tokens, n_gate] being one logit per element
// (n_gate = n_head*dv) or per head (n_gate = n_head). The element-wise sigmoid keeps its own op
// (mul_sigmoid, whose numbers the sigmoid-gated models were checked with); the other forms are
// Backend::mul_gate, which leaves the activated logits in `gate` for the trace.
void apply_output_gate(Backend& backend, const AttentionWeights& w, int64_t layer, float* gate,
                       float* attn, int64_t n_tokens, int64_t o_row, const Trace& trace) {
  const int64_t n_gate = w.gate.n_rows;
  if (w.gate_act == OutputGate::kSigmoid && n_gate == o_row) {
    backend.mul_sigmoid(attn, gate, n_tokens * o_row);
    return;
  }
  const bool softplus = w.gate_act == OutputGate::kSoftplus;
  backend.mul_gate(softplus ? GateActivation::kSoftplus : GateActivation::kSigmoid, attn, gate,
                   n_tokens, o_row, n_gate);
  if (softplus) trace("attn_gate_softplus", layer, gate, n_gate);
}

// q_full [n_heads, 2 dk] (every token's heads in a row) → q and gate [n_heads, dk]: the two
// halves of each head as column blocks of rows.
void split_gated_query(Backend& backend, const float* q_full, float* q, float* gate,
                       int64_t n_heads, int64_t dk) {
  backend.copy_strided_rows(q_full, 2 * dk, q, dk, n_heads, dk);
  backend.copy_strided_rows(q_full + dk, 2 * dk, gate, dk, n_heads, dk);
}

}  // namespace

AttentionWeights bind_attention(WeightBinder& binder, int64_t layer, const AttentionShape& s,
                                bool with_gate) {
  AttentionWeights w;
  const int64_t q_dim = s.n_head * s.head_dim_k;
  const int64_t k_dim = s.n_head_kv * s.head_dim_k;
  const int64_t v_dim = s.n_head_kv * s.head_dim_v;
  const int64_t o_dim = s.n_head * s.head_dim_v;
  w.wq = binder.matrix(layer_tensor(layer, "attn_q.weight"), s.n_embd,
                       s.gated_query ? 2 * q_dim : q_dim);
  w.wk = binder.matrix(layer_tensor(layer, "attn_k.weight"), s.n_embd, k_dim);
  w.wv = binder.matrix(layer_tensor(layer, "attn_v.weight"), s.n_embd, v_dim);
  w.wo = binder.matrix(layer_tensor(layer, "attn_output.weight"), o_dim, s.n_embd);
  w.bq = binder.optional_vector(layer_tensor(layer, "attn_q.bias"), q_dim)
             .value_or(std::vector<float>{});
  w.bk = binder.optional_vector(layer_tensor(layer, "attn_k.bias"), k_dim)
             .value_or(std::vector<float>{});
  w.bv = binder.optional_vector(layer_tensor(layer, "attn_v.bias"), v_dim)
             .value_or(std::vector<float>{});
  w.bo = binder.optional_vector(layer_tensor(layer, "attn_output.bias"), s.n_embd)
             .value_or(std::vector<float>{});
  const int64_t q_norm_dim = s.qk_norm_across_heads ? q_dim : s.head_dim_k;
  const int64_t k_norm_dim = s.qk_norm_across_heads ? k_dim : s.head_dim_k;
  w.q_norm = binder.optional_vector(layer_tensor(layer, "attn_q_norm.weight"), q_norm_dim)
                 .value_or(std::vector<float>{});
  w.k_norm = binder.optional_vector(layer_tensor(layer, "attn_k_norm.weight"), k_norm_dim)
                 .value_or(std::vector<float>{});
  if (with_gate) w.gate = binder.matrix(layer_tensor(layer, "attn_gate.weight"), s.n_embd, o_dim);
  return w;
}

void AttentionScratch::reserve(Backend& backend, const AttentionShape& s, int64_t n_batch) {
  q.resize(backend, size_t(n_batch * s.n_head * s.head_dim_k));
  k.resize(backend, size_t(n_batch * s.n_head_kv * s.head_dim_k));
  v.resize(backend, size_t(n_batch * s.n_head_kv * s.head_dim_v));
  attn.resize(backend, size_t(n_batch * s.n_head * s.head_dim_v));
  gate.resize(backend, size_t(n_batch * s.n_head * s.head_dim_v));
  if (s.gated_query) q_full.resize(backend, size_t(n_batch * 2 * s.n_head * s.head_dim_k));
}

namespace {

// The norms and RoPE of q / k, op by op (several sequences, or norms over whole rows: OLMoE);
// the cells are written by the caller.
void prepare_attention_inputs(Backend& backend, const AttentionWeights& w, const AttentionShape& s,
                              const AttentionLayerConfig& config,
                              std::span<const SequenceRun> sequences, bool own_kv, float* q,
                              float* k, float* v, int64_t n_tokens) {
  const int64_t q_row = s.n_head * s.head_dim_k, k_row = s.n_head_kv * s.head_dim_k;
  if (!w.q_norm.empty()) {
    const int64_t dim = int64_t(w.q_norm.size());
    backend.rms_norm(q, w.q_norm.data(), q, n_tokens * q_row / dim, dim, s.norm_eps);
  }
  if (own_kv && !w.k_norm.empty()) {
    const int64_t dim = int64_t(w.k_norm.size());
    backend.rms_norm(k, w.k_norm.data(), k, n_tokens * k_row / dim, dim, s.norm_eps);
  }
  if (own_kv && s.v_norm) {
    backend.rms_norm(v, nullptr, v, n_tokens * s.n_head_kv, s.head_dim_v, s.norm_eps);
  }
  for (const SequenceRun& run : sequences) {
    backend.rope(q + run.row0 * q_row, run.n_tokens, s.n_head, s.head_dim_k, run.pos0, config.rope);
    if (!own_kv) continue;
    backend.rope(k + run.row0 * k_row, run.n_tokens, s.n_head_kv, s.head_dim_k, run.pos0,
                 config.rope);
  }
}

}  // namespace

void self_attention(Backend& backend, const AttentionWeights& w, const AttentionShape& s,
                    const AttentionLayerConfig& config, std::span<const SequenceRun> sequences,
                    int64_t layer, const float* x, int64_t n_tokens, AttentionScratch& scratch,
                    float* out, const Trace& trace) {
  float* q = scratch.q.data();
  float* k = scratch.k.data();
  float* v = scratch.v.data();
  const bool own_kv = config.shared_kv_layer < 0;
  const int64_t q_row = s.n_head * s.head_dim_k, k_row = s.n_head_kv * s.head_dim_k;
  const int64_t v_row = s.n_head_kv * s.head_dim_v, o_row = s.n_head * s.head_dim_v;
  // Q, K and V read the same input: one activation conversion serves all three.
  float* q_out = s.gated_query ? scratch.q_full.data() : q;
  if (own_kv) {
    const bool with_v = w.wv.data != nullptr;
    const MatrixView ws[] = {w.wq, w.wk, w.wv};
    float* const ys[] = {q_out, k, v};
    backend.matmul_shared_input(ws, ys, with_v ? 3 : 2, x, n_tokens);
    if (!with_v) backend.copy(v, k, size_t(n_tokens * k_row) * sizeof(float));
  } else {
    backend.matmul(w.wq, x, q_out, n_tokens);
  }
  if (s.gated_query) {
    split_gated_query(backend, scratch.q_full.data(), q, scratch.gate.data(), n_tokens * s.n_head,
                      s.head_dim_k);
  }
  if (!w.bq.empty()) backend.add_bias(q, w.bq.data(), n_tokens, q_row);
  if (!w.bk.empty()) backend.add_bias(k, w.bk.data(), n_tokens, w.wk.n_rows);
  if (!w.bv.empty()) backend.add_bias(v, w.bv.data(), n_tokens, w.wv.n_rows);
  // One sequence (every decode step) with per-head norms or none: norms, RoPE and the cell
  // writes are one backend op (one kernel on a GPU instead of six).
  const auto per_head = [&](const std::vector<float>& norm) {
    return norm.empty() || int64_t(norm.size()) == s.head_dim_k;
  };
  const bool fused_inputs = own_kv && sequences.size() == 1 && sequences.front().row0 == 0 &&
                            !s.v_norm && per_head(w.q_norm) && per_head(w.k_norm);
  if (fused_inputs) {
    AttentionInputs in;
    in.q = q;
    in.k = k;
    in.v = v;
    in.n_tokens = n_tokens;
    in.n_head = s.n_head;
    in.pos0 = sequences.front().pos0;
    in.q_norm = w.q_norm.empty() ? nullptr : w.q_norm.data();
    in.k_norm = w.k_norm.empty() ? nullptr : w.k_norm.data();
    in.norm_eps = s.norm_eps;
    in.rope = config.rope;
    in.kv = sequences.front().kv->layer(layer);
    backend.attention_inputs(in);
  } else {
    prepare_attention_inputs(backend, w, s, config, sequences, own_kv, q, k, v, n_tokens);
  }
  trace("Qcur", layer, q, q_row);
  if (own_kv) {
    trace("Kcur", layer, k, k_row);
    trace("Vcur", layer, v, v_row);
  }

  float scale = config.scale;
  if (config.scale_query) {
    backend.scale(q, config.scale, n_tokens * q_row);
    scale = 1.0f;
  }
  for (const SequenceRun& run : sequences) {
    const KvLayerView kv_layer = run.kv->layer(own_kv ? layer : config.shared_kv_layer);
    if (own_kv && !fused_inputs) {
      backend.kv_store(kv_layer, k + run.row0 * k_row, v + run.row0 * v_row, run.n_tokens,
                       run.pos0);
    }
    AttentionCall call;
    call.q = q + run.row0 * q_row;
    call.out = scratch.attn.data() + run.row0 * o_row;
    call.n_tokens = run.n_tokens;
    call.n_head = s.n_head;
    call.pos0 = run.pos0;
    call.window = config.window;
    call.scale = scale;
    call.sinks = w.sinks.empty() ? nullptr : w.sinks.data();
    call.kv = kv_layer;
    backend.attention(call);
  }
  const float* attn = scratch.attn.data();
  trace("kqv_out", layer, attn, o_row);

  if (s.gated_query) {
    backend.mul_sigmoid(scratch.attn.data(), scratch.gate.data(), n_tokens * o_row);
    trace("attn_gated", layer, attn, o_row);
  } else if (w.gate.data != nullptr) {
    backend.matmul(w.gate, x, scratch.gate.data(), n_tokens);
    trace("attn_gate_proj", layer, scratch.gate.data(), w.gate.n_rows);
    apply_output_gate(backend, w, layer, scratch.gate.data(), scratch.attn.data(), n_tokens, o_row,
                      trace);
    trace("attn_gated", layer, attn, o_row);
  }
  backend.matmul(w.wo, attn, out, n_tokens);
  if (!w.bo.empty()) backend.add_bias(out, w.bo.data(), n_tokens, s.n_embd);
  trace("attn_out", layer, out, s.n_embd);
}

}  // namespace sluice::model
