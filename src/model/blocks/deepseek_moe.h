// DeepSeekMoE feed-forward: the FFN of DeepSeek V2/V3 and GLM-4.5. The first
// leading_dense_block_count layers have a dense gated FFN; every later layer routes each token
// to fine-grained experts (blocks/moe_ffn) and adds always-on shared experts, one dense gated
// FFN of n_expert_shared * n_ff_exp (ffn_{gate,up,down}_shexp), summed as llama.cpp sums them:
// routed + shared. Knows no architecture.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "experts/expert_layout.h"
#include "experts/expert_source.h"
#include "model/blocks/ffn.h"
#include "model/blocks/moe_ffn.h"
#include "model/blocks/trace.h"
#include "model/hparams.h"
#include "model/weights.h"

namespace sluice::model {

struct DeepSeekMoeWeights {
  bool is_moe = false;
  GluFfnWeights dense;   // when !is_moe
  MoeFfnWeights routed;  // when is_moe
  GluFfnWeights shared;  // when is_moe; shared.gate.data == nullptr when the file has none
};

// The router the file's keys describe: expert_gating_func (absent: default_gating), weights
// normalised when expert_weights_norm says so, expert_weights_scale, expert groups.
RouterConfig deepseek_moe_router(const MoeHParams& moe, ExpertGating default_gating);

// Layer `layer` < moe.n_layer_dense_lead binds ffn_{gate,up,down} of n_ff; a later one the router,
// the expert stacks (into layout) and, when moe.n_expert_shared > 0, the shared experts.
DeepSeekMoeWeights bind_deepseek_moe(WeightBinder& binder, int64_t layer, int64_t n_embd,
                                     int64_t n_ff, const MoeHParams& moe,
                                     const RouterConfig& router, experts::ExpertLayout& layout);

struct DeepSeekMoeScratch {
  MoeScratch moe;
  FfnScratch ffn;              // the dense layers' and the shared experts' gate/up
  BackendArray<float> shared;  // [n_batch, n_embd] the shared experts' output
  MoeScratch spec;             // speculation's routing for the next layer
  void reserve(Backend& backend, const std::vector<DeepSeekMoeWeights>& layers, int64_t n_embd,
               int64_t n_batch);
};

// Whether a one-token forward through these layers reads back to the host
// (LanguageModel::decode_reads_host): some MoE layer's choice cannot stay on the backend
// (moe_decode_stays_on_backend: a router choosing on the host, experts not all in place, experts
// on another backend) or there is no source. Dense lead layers never read back. Call it after
// reserve(), whose scratch it asks about.
bool deepseek_moe_decode_reads_host(const Backend& backend,
                                    const std::vector<DeepSeekMoeWeights>& layers,
                                    const experts::ExpertSource* source,
                                    const DeepSeekMoeScratch& scratch,
                                    const Backend* expert_backend);

// In two halves, as moe_route / moe_compute, so the caller can start speculative reads between:
// deepseek_moe_route routes x [n_tokens, n_embd] and acquires the chosen experts (nothing for a
// dense layer); deepseek_moe_compute writes out [n_tokens, n_embd]. expert_backend: as
// moe_compute's (the CPU computing the routed experts while the rest runs on the GPU).
void deepseek_moe_route(Backend& backend, const DeepSeekMoeWeights& w,
                        experts::ExpertSource* source, int64_t layer, const float* x,
                        int64_t n_tokens, DeepSeekMoeScratch& scratch, const Trace& trace,
                        Backend* expert_backend = nullptr);
void deepseek_moe_compute(Backend& backend, const DeepSeekMoeWeights& w,
                          experts::ExpertSource* source, int64_t layer, const float* x,
                          int64_t n_tokens, int64_t n_embd, DeepSeekMoeScratch& scratch, float* out,
                          const Trace& trace, Backend* expert_backend = nullptr);

// Speculation between the halves: moe_prefetch for layer next_layer when it is MoE (with its
// FFN norm `next_norm`); nothing for a dense layer or without a source.
void deepseek_moe_prefetch(Backend& backend, const DeepSeekMoeWeights& next,
                           const std::vector<float>& next_norm, float norm_eps,
                           experts::ExpertSource* source, int64_t next_layer, const float* x,
                           int64_t n_tokens, int64_t n_embd, DeepSeekMoeScratch& scratch);

// The next layer's FFN and its norm, for speculation; both nullptr after the last layer.
struct DeepSeekMoeNext {
  const DeepSeekMoeWeights* ffn = nullptr;
  const std::vector<float>* norm = nullptr;
};

// The FFN half of a pre-norm decoder layer: x [n_tokens, n_embd] += ffn(ffn_norm(x)), the
// normed input traced as `norm_trace` (llama.cpp's name) and x as l_out afterwards; the next
// layer's experts are guessed between routing and computing. xn and branch are scratch rows.
void deepseek_moe_residual(Backend& backend, const DeepSeekMoeWeights& ffn,
                           const std::vector<float>& norm, DeepSeekMoeNext next, float norm_eps,
                           experts::ExpertSource* source, int64_t layer, float* x, float* xn,
                           float* branch, int64_t n_tokens, int64_t n_embd,
                           DeepSeekMoeScratch& scratch, const Trace& trace,
                           const char* norm_trace = "ffn_norm", Backend* expert_backend = nullptr);

}  // namespace sluice::model
