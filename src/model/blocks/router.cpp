// The router, step by step in llama.cpp's order.
#include "model/blocks/router.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace sluice::model {

ExpertSelection expert_selection(const RouterConfig& c) {
  ExpertSelection s;
  s.n_expert = c.n_expert;
  s.n_expert_used = c.n_expert_used;
  s.n_group = c.n_group;
  s.n_group_used = c.n_group_used;
  s.norm_weights = c.norm_weights;
  s.weights_scale = c.weights_scale;
  // What the gate hands Backend::select_experts: logits whose softmax it takes first (one
  // launch fewer on a GPU), whose sigmoid it takes, or whose chosen it softmaxes.
  // sqrt-softplus stays a host step. (The host path selects on probabilities it made itself and
  // reads only the groups and the weights' scaling from here.)
  s.scoring = c.gating == ExpertGating::kSoftmax         ? ExpertScoring::kSoftmax
              : c.gating == ExpertGating::kSigmoid       ? ExpertScoring::kSigmoid
              : c.gating == ExpertGating::kSoftmaxWeight ? ExpertScoring::kSoftmaxChosen
                                                         : ExpertScoring::kProbabilities;
  return s;
}

void RouterScratch::reserve(Backend& backend, const RouterConfig& c, int64_t n_batch) {
  logits.resize(backend, size_t(n_batch * c.n_expert));
  probs.resize(size_t(n_batch * c.n_expert));
  selection.scores.reserve(size_t(c.n_expert));
  selection.order.reserve(size_t(c.n_expert));
  selection.group_scores.reserve(size_t(std::max<int64_t>(c.n_group, 1)));
  selected.resize(size_t(n_batch * c.n_expert_used));
  weights.resize(size_t(n_batch * c.n_expert_used));
  if (!backend.host_memory()) {
    backend_selected.resize(backend, size_t(n_batch * c.n_expert_used));
    backend_weights.resize(backend, size_t(n_batch * c.n_expert_used));
  }
}

namespace {

// The gate's logits (+ bias) into s.logits on the backend, and their softmax when that is the
// gating and `softmax` asks for it (select_experts may take it over: ExpertScoring::kSoftmax).
const float* gate_scores(Backend& backend, const RouterWeights& w, const RouterConfig& c,
                         int64_t layer, const float* x, int64_t n_tokens, RouterScratch& s,
                         const Trace& trace, bool softmax = true) {
  float* logits = s.logits.data();
  backend.matmul(w.gate, x, logits, n_tokens);
  trace("ffn_moe_logits", layer, logits, c.n_expert);
  if (!w.gate_bias.empty()) {
    backend.add_bias(logits, w.gate_bias.data(), n_tokens, c.n_expert);
    trace("ffn_moe_logits_biased", layer, logits, c.n_expert);
  }
  if (softmax && c.gating == ExpertGating::kSoftmax) {
    backend.softmax_rows(logits, n_tokens, c.n_expert);
  }
  return logits;
}

}  // namespace

bool selects_on_backend(const RouterConfig& c, const RouterScratch& s) {
  return c.gating != ExpertGating::kSqrtSoftplus && s.given == nullptr;
}

void route_tokens_on_backend(Backend& backend, const RouterWeights& w, const RouterConfig& c,
                             int64_t layer, const float* x, int64_t n_tokens, RouterScratch& s,
                             int32_t* selected, float* weights) {
  if (!selects_on_backend(c, s)) fail("router: this gating cannot choose on the backend");
  // A softmax gate's softmax is select_experts' own first step (expert_selection).
  const float* scores = gate_scores(backend, w, c, layer, x, n_tokens, s, {}, /*softmax=*/false);
  backend.select_experts(scores, w.selection_bias.empty() ? nullptr : w.selection_bias.data(),
                         n_tokens, expert_selection(c), selected, weights);
}

void route_tokens(Backend& backend, const RouterWeights& w, const RouterConfig& c, int64_t layer,
                  const float* x, int64_t n_tokens, RouterScratch& s, const Trace& trace) {
  if (n_tokens > 1 && !backend.host_memory() && trace.observer == nullptr &&
      selects_on_backend(c, s)) {
    // A GPU's chunk: chosen on the device, only the choices come back (n_tokens × k ids and
    // weights, not n_tokens × n_expert probabilities) and the host sorts nothing — 512 tokens'
    // sorts took ~1 ms per layer. The same choices as the host's for distinct scores.
    const size_t chosen = size_t(n_tokens * c.n_expert_used);
    route_tokens_on_backend(backend, w, c, layer, x, n_tokens, s, s.backend_selected.data(),
                            s.backend_weights.data());
    backend.download(s.selected.data(), s.backend_selected.data(), chosen * sizeof(int32_t));
    backend.download(s.weights.data(), s.backend_weights.data(), chosen * sizeof(float));
    return;
  }
  const float* logits = gate_scores(backend, w, c, layer, x, n_tokens, s, trace);
  float* probs = s.probs.data();
  backend.download(probs, logits, size_t(n_tokens * c.n_expert) * sizeof(float));
  Trace host_trace = trace;
  host_trace.backend = nullptr;
  if (c.gating == ExpertGating::kSigmoid) {
    for (int64_t i = 0; i < n_tokens * c.n_expert; ++i) probs[i] = sigmoid_probability(probs[i]);
  } else if (c.gating == ExpertGating::kSqrtSoftplus) {
    // ggml's softplus (linear above 20), then its sqrt.
    for (int64_t i = 0; i < n_tokens * c.n_expert; ++i) {
      const float x = probs[i];
      probs[i] = std::sqrt(x > 20.0f ? x : std::log(1.0f + std::exp(x)));
    }
  }
  host_trace("ffn_moe_probs", layer, probs, c.n_expert);

  const ExpertSelection selection = expert_selection(c);
  const bool softmax_chosen = c.gating == ExpertGating::kSoftmaxWeight;
  const float* bias = w.selection_bias.empty() ? nullptr : w.selection_bias.data();
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* token_probs = probs + t * c.n_expert;
    int32_t* chosen = s.selected.data() + t * c.n_expert_used;
    if (s.given != nullptr) {
      std::copy_n(s.given + t * c.n_expert_used, c.n_expert_used, chosen);
    } else {
      select_top_experts(token_probs, bias, selection, s.selection, chosen);
    }
    weigh_chosen_experts(token_probs, chosen, selection, softmax_chosen,
                         s.weights.data() + t * c.n_expert_used);
  }
}

}  // namespace sluice::model
