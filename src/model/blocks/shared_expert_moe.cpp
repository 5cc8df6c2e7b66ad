// The routed experts plus the sigmoid-gated shared expert, summed in llama.cpp's order:
// routed + shared * sigmoid(gate).
#include "model/blocks/shared_expert_moe.h"

namespace sluice::model {

SharedExpertMoeWeights bind_shared_expert_moe(WeightBinder& binder, int64_t layer, int64_t n_embd,
                                              int64_t n_ff_exp, int64_t n_ff_shexp,
                                              const RouterConfig& router,
                                              experts::ExpertLayout& layout) {
  SharedExpertMoeWeights w;
  w.routed = bind_moe_ffn(binder, layer, n_embd, n_ff_exp, router, layout);
  w.shared.gate = binder.matrix(layer_tensor(layer, "ffn_gate_shexp.weight"), n_embd, n_ff_shexp);
  w.shared.up = binder.matrix(layer_tensor(layer, "ffn_up_shexp.weight"), n_embd, n_ff_shexp);
  w.shared.down = binder.matrix(layer_tensor(layer, "ffn_down_shexp.weight"), n_ff_shexp, n_embd);
  // A 1-D [n_embd] tensor multiplied as a one-row matrix, as llama.cpp's mul_mat does.
  w.shared_gate = binder.matrix(layer_tensor(layer, "ffn_gate_inp_shexp.weight"), n_embd, 1);
  return w;
}

void SharedExpertMoeScratch::reserve(Backend& backend, const SharedExpertMoeWeights& w,
                                     int64_t n_embd, int64_t n_batch) {
  moe.reserve(backend, w.routed, n_embd, n_batch);
  spec.reserve(backend, w.routed, n_embd, n_batch);
  ffn.reserve(backend, w.shared.gate.n_rows, n_batch);
  shared.resize(backend, size_t(n_batch * n_embd));
  gate.resize(backend, size_t(n_batch));
}

void shared_expert_moe_route(Backend& backend, const SharedExpertMoeWeights& w,
                             experts::ExpertSource& source, int64_t layer, const float* x,
                             int64_t n_tokens, SharedExpertMoeScratch& s, const Trace& trace,
                             const Backend* expert_backend) {
  moe_route(backend, w.routed, source, layer, x, n_tokens, s.moe, trace, expert_backend);
}

void shared_expert_moe_compute(Backend& backend, const SharedExpertMoeWeights& w,
                               experts::ExpertSource& source, int64_t layer, const float* x,
                               int64_t n_tokens, int64_t n_embd, SharedExpertMoeScratch& s,
                               float* out, const Trace& trace, Backend* expert_backend) {
  moe_compute(backend, w.routed, source, layer, x, n_tokens, n_embd, s.moe, out, trace,
              expert_backend);
  // Untraced inside: its own ffn_out would shadow the layer's, which is the sum below.
  glu_ffn(backend, w.shared, GluActivation::kSilu, layer, x, n_tokens, s.ffn, s.shared.data(),
          Trace{});
  trace("ffn_shexp", layer, s.shared.data(), n_embd);
  backend.matmul(w.shared_gate, x, s.gate.data(), n_tokens);
  trace("shared_expert_gate", layer, s.gate.data(), 1);
  backend.mul_gate(GateActivation::kSigmoid, s.shared.data(), s.gate.data(), n_tokens, n_embd, 1);
  trace("ffn_shexp_gated", layer, s.shared.data(), n_embd);
  backend.add(out, s.shared.data(), n_tokens * n_embd);
  trace("ffn_out", layer, out, n_embd);
}

void shared_expert_moe_prefetch(Backend& backend, const SharedExpertMoeWeights& next,
                                const std::vector<float>& next_norm, float norm_eps,
                                experts::ExpertSource& source, int64_t next_layer, const float* x,
                                int64_t n_tokens, int64_t n_embd, SharedExpertMoeScratch& s) {
  moe_prefetch(backend, next.routed, next_norm, norm_eps, source, next_layer, x, n_tokens, n_embd,
               s.spec);
}

}  // namespace sluice::model
