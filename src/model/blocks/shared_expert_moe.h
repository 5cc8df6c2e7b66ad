// Mixture of Experts with one gated shared expert, as Qwen3-Next and Qwen3.5-MoE have it: the
// routed experts (blocks/moe_ffn: softmax router, top-k, weights renormalised) plus a dense
// SwiGLU shared expert (ffn_{gate,up,down}_shexp) whose output is scaled per token by
// sigmoid(ffn_gate_inp_shexp · x), then added to the routed sum. Knows no architecture.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_array.h"
#include "experts/expert_layout.h"
#include "experts/expert_source.h"
#include "model/blocks/ffn.h"
#include "model/blocks/moe_ffn.h"
#include "model/blocks/trace.h"
#include "model/weights.h"

namespace sluice::model {

struct SharedExpertMoeWeights {
  MoeFfnWeights routed;
  GluFfnWeights shared;    // [n_embd, n_ff_shexp] gate / up, [n_ff_shexp, n_embd] down
  MatrixView shared_gate;  // [n_embd, 1] ffn_gate_inp_shexp: one logit per token
};

// Binds the router and expert stacks (into layout, as bind_moe_ffn) and the shared expert.
SharedExpertMoeWeights bind_shared_expert_moe(WeightBinder& binder, int64_t layer, int64_t n_embd,
                                              int64_t n_ff_exp, int64_t n_ff_shexp,
                                              const RouterConfig& router,
                                              experts::ExpertLayout& layout);

struct SharedExpertMoeScratch {
  MoeScratch moe;
  MoeScratch spec;             // speculation's routing for the next layer
  FfnScratch ffn;              // the shared expert's gate / up
  BackendArray<float> shared;  // [n_batch, n_embd] its output
  BackendArray<float> gate;    // [n_batch] its per-token gate
  void reserve(Backend& backend, const SharedExpertMoeWeights& w, int64_t n_embd, int64_t n_batch);
};

// In two halves, as moe_route / moe_compute, so the caller can start speculative reads between
// (shared_expert_moe_prefetch for the next layer). expert_backend: as moe_route / moe_compute's.
void shared_expert_moe_route(Backend& backend, const SharedExpertMoeWeights& w,
                             experts::ExpertSource& source, int64_t layer, const float* x,
                             int64_t n_tokens, SharedExpertMoeScratch& scratch, const Trace& trace,
                             const Backend* expert_backend = nullptr);
void shared_expert_moe_compute(Backend& backend, const SharedExpertMoeWeights& w,
                               experts::ExpertSource& source, int64_t layer, const float* x,
                               int64_t n_tokens, int64_t n_embd, SharedExpertMoeScratch& scratch,
                               float* out, const Trace& trace, Backend* expert_backend = nullptr);
void shared_expert_moe_prefetch(Backend& backend, const SharedExpertMoeWeights& next,
                                const std::vector<float>& next_norm, float norm_eps,
                                experts::ExpertSource& source, int64_t next_layer, const float* x,
                                int64_t n_tokens, int64_t n_embd, SharedExpertMoeScratch& scratch);

}  // namespace sluice::model
