// The DeepSeekMoE feed-forward: dense lead layers, routed experts plus shared experts, the
// shared experts' output added to the routed sum before the residual (llama.cpp's order).
#include "model/blocks/deepseek_moe.h"

#include <algorithm>

#include "core/error.h"

namespace sluice::model {

RouterConfig deepseek_moe_router(const MoeHParams& moe, ExpertGating default_gating) {
  RouterConfig config;
  config.n_expert = moe.n_expert;
  config.n_expert_used = moe.n_expert_used;
  config.gating = default_gating;
  if (moe.gating_func) {  // llama.cpp's enum: 1 softmax, 2 sigmoid, 3 softmax of the chosen
    config.gating = *moe.gating_func == 1   ? ExpertGating::kSoftmax
                    : *moe.gating_func == 2 ? ExpertGating::kSigmoid
                                            : ExpertGating::kSoftmaxWeight;
  }
  config.norm_weights = moe.weights_norm.value_or(false);
  config.weights_scale = moe.weights_scale;
  config.n_group = moe.n_group;
  config.n_group_used = moe.n_group_used;
  return config;
}

DeepSeekMoeWeights bind_deepseek_moe(WeightBinder& binder, int64_t layer, int64_t n_embd,
                                     int64_t n_ff, const MoeHParams& moe,
                                     const RouterConfig& router, experts::ExpertLayout& layout) {
  DeepSeekMoeWeights w;
  w.is_moe = layer >= moe.n_layer_dense_lead;
  if (!w.is_moe) {
    w.dense = bind_glu_ffn(binder, layer, n_embd, n_ff);
    return w;
  }
  w.routed = bind_moe_ffn(binder, layer, n_embd, moe.n_ff_exp, router, layout);
  if (moe.n_expert_shared > 0) {
    // llama.cpp sizes the shared experts as n_ff_exp * n_expert_shared, whatever
    // expert_shared_feed_forward_length says.
    const int64_t n_ff_shexp = moe.n_ff_exp * moe.n_expert_shared;
    w.shared.gate = binder.matrix(layer_tensor(layer, "ffn_gate_shexp.weight"), n_embd, n_ff_shexp);
    w.shared.up = binder.matrix(layer_tensor(layer, "ffn_up_shexp.weight"), n_embd, n_ff_shexp);
    w.shared.down = binder.matrix(layer_tensor(layer, "ffn_down_shexp.weight"), n_ff_shexp, n_embd);
  }
  return w;
}

void DeepSeekMoeScratch::reserve(Backend& backend, const std::vector<DeepSeekMoeWeights>& layers,
                                 int64_t n_embd, int64_t n_batch) {
  int64_t n_ff = 0;
  bool moe_reserved = false;
  for (const DeepSeekMoeWeights& w : layers) {
    n_ff = std::max(n_ff, w.is_moe ? w.shared.gate.n_rows : w.dense.gate.n_rows);
    if (w.is_moe && !moe_reserved) {
      moe.reserve(backend, w.routed, n_embd, n_batch);
      spec.reserve(backend, w.routed, n_embd, n_batch);
      moe_reserved = true;
    }
  }
  ffn.reserve(backend, n_ff, n_batch);
  shared.resize(backend, size_t(n_batch * n_embd));
}

bool deepseek_moe_decode_reads_host(const Backend& backend,
                                    const std::vector<DeepSeekMoeWeights>& layers,
                                    const experts::ExpertSource* source,
                                    const DeepSeekMoeScratch& scratch,
                                    const Backend* expert_backend) {
  for (size_t il = 0; il < layers.size(); ++il) {
    const DeepSeekMoeWeights& w = layers[il];
    if (!w.is_moe) continue;
    if (source == nullptr || !moe_decode_stays_on_backend(backend, w.routed, *source, int64_t(il),
                                                          scratch.moe, expert_backend)) {
      return true;
    }
  }
  return false;
}

void deepseek_moe_route(Backend& backend, const DeepSeekMoeWeights& w,
                        experts::ExpertSource* source, int64_t layer, const float* x,
                        int64_t n_tokens, DeepSeekMoeScratch& s, const Trace& trace,
                        Backend* expert_backend) {
  if (!w.is_moe) return;
  if (source == nullptr) fail("MoE layer ", layer, ": forward without an expert source");
  moe_route(backend, w.routed, *source, layer, x, n_tokens, s.moe, trace, expert_backend);
}

void deepseek_moe_compute(Backend& backend, const DeepSeekMoeWeights& w,
                          experts::ExpertSource* source, int64_t layer, const float* x,
                          int64_t n_tokens, int64_t n_embd, DeepSeekMoeScratch& s, float* out,
                          const Trace& trace, Backend* expert_backend) {
  if (!w.is_moe) {
    glu_ffn(backend, w.dense, GluActivation::kSilu, layer, x, n_tokens, s.ffn, out, trace);
    return;
  }
  moe_compute(backend, w.routed, *source, layer, x, n_tokens, n_embd, s.moe, out, trace,
              expert_backend);
  if (w.shared.gate.data != nullptr) {
    // The shared experts' inner tensors stay untraced: llama.cpp names them as the dense
    // FFN's, and the layer's ffn_out is the sum below.
    glu_ffn(backend, w.shared, GluActivation::kSilu, layer, x, n_tokens, s.ffn, s.shared.data(),
            Trace{});
    trace("ffn_shexp", layer, s.shared.data(), n_embd);
    backend.add(out, s.shared.data(), n_tokens * n_embd);
  }
  trace("ffn_out", layer, out, n_embd);
}

void deepseek_moe_prefetch(Backend& backend, const DeepSeekMoeWeights& next,
                           const std::vector<float>& next_norm, float norm_eps,
                           experts::ExpertSource* source, int64_t next_layer, const float* x,
                           int64_t n_tokens, int64_t n_embd, DeepSeekMoeScratch& s) {
  if (source == nullptr || !next.is_moe) return;
  moe_prefetch(backend, next.routed, next_norm, norm_eps, *source, next_layer, x, n_tokens, n_embd,
               s.spec);
}

void deepseek_moe_residual(Backend& backend, const DeepSeekMoeWeights& ffn,
                           const std::vector<float>& norm, DeepSeekMoeNext next, float norm_eps,
                           experts::ExpertSource* source, int64_t layer, float* x, float* xn,
                           float* branch, int64_t n_tokens, int64_t n_embd,
                           DeepSeekMoeScratch& scratch, const Trace& trace, const char* norm_trace,
                           Backend* expert_backend) {
  trace("ffn_inp", layer, x, n_embd);
  backend.rms_norm(x, norm.data(), xn, n_tokens, n_embd, norm_eps);
  trace(norm_trace, layer, xn, n_embd);
  deepseek_moe_route(backend, ffn, source, layer, xn, n_tokens, scratch, trace, expert_backend);
  if (next.ffn != nullptr) {
    deepseek_moe_prefetch(backend, *next.ffn, *next.norm, norm_eps, source, layer + 1, x, n_tokens,
                          n_embd, scratch);
  }
  deepseek_moe_compute(backend, ffn, source, layer, xn, n_tokens, n_embd, scratch, branch, trace,
                       expert_backend);
  backend.add(x, branch, n_tokens * n_embd);
  trace("l_out", layer, x, n_embd);
}

}  // namespace sluice::model
