// Router of a Mixture-of-Experts layer: scores every expert for every token and picks the
// n_expert_used it will run, with their weights — exactly as llama.cpp's build_moe_ffn does:
// gate (softmax, sigmoid, or softmax over the chosen logits), an optional selection bias
// (DeepSeek V3's exp_probs_b: it changes which experts win, not their weights), group-limited
// selection, a descending sort of the scores (ties broken as std::sort breaks them there), then
// optional normalisation and scaling of the weights. Knows no architecture.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_array.h"
#include "backend/expert_selection.h"
#include "model/blocks/trace.h"

namespace sluice::model {

enum class ExpertGating : uint8_t {
  kSoftmax,        // probabilities = softmax(logits); weights from them
  kSigmoid,        // probabilities = sigmoid(logits)
  kSoftmaxWeight,  // select on raw logits; weights = softmax of the chosen logits (gpt-oss)
  kSqrtSoftplus,   // probabilities = sqrt(softplus(logits)) (DeepSeek V4)
};

struct RouterConfig {
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  ExpertGating gating = ExpertGating::kSoftmax;
  bool norm_weights = false;   // divide the chosen weights by their sum
  float weights_scale = 0.0f;  // 0 or 1: no scaling
  int64_t n_group = 0;         // > 1: experts in n_group groups, only n_group_used groups eligible
  int64_t n_group_used = 0;
};

struct RouterWeights {
  MatrixView gate;                    // [n_embd, n_expert]
  std::vector<float> gate_bias;       // [n_expert] added to the logits; empty when none
  std::vector<float> selection_bias;  // [n_expert] exp_probs_b; empty when none
};

struct RouterScratch {
  BackendArray<float> logits;     // [n_batch, n_expert] the gate's output (backend memory)
  std::vector<float> probs;       // [n_batch, n_expert] probabilities, on the host
  SelectionScratch selection;     // one token's selection buffers
  std::vector<int32_t> selected;  // [n_batch, n_expert_used] expert ids, best first
  std::vector<float> weights;     // [n_batch, n_expert_used]
  // A GPU's chunk chosen on the device (route_tokens), before the download: backend memory.
  BackendArray<int32_t> backend_selected;
  BackendArray<float> backend_weights;
  // [n_tokens, n_expert_used] experts chosen by the caller (DeepSeek V4's hash-routed layers pick
  // them from the token ids); the probabilities still weigh them. nullptr: the router selects.
  const int32_t* given = nullptr;
  void reserve(Backend& backend, const RouterConfig& config, int64_t n_batch);
};

// The selection part of a router's configuration, with the scoring its gate hands
// Backend::select_experts (a softmax gate: kSoftmax, its logits).
ExpertSelection expert_selection(const RouterConfig& config);

// Routes x [n_tokens, n_embd]: fills scratch.selected and scratch.weights. The gate's product (and
// its bias and softmax) run on the backend; the probabilities are read back and the selection
// is made on the host — but for a chunk on a GPU whose router can choose there
// (selects_on_backend) and no trace, which chooses on the device (route_tokens_on_backend) and
// reads back only the choices.
void route_tokens(Backend& backend, const RouterWeights& w, const RouterConfig& config,
                  int64_t layer, const float* x, int64_t n_tokens, RouterScratch& scratch,
                  const Trace& trace);

// Whether the choice can stay on the backend (route_tokens_on_backend): Backend::select_experts
// knows the gating (softmax, sigmoid, softmax of the chosen logits; not sqrt-softplus) and the
// caller gives no experts.
bool selects_on_backend(const RouterConfig& config, const RouterScratch& scratch);

// Routes x [n_tokens, n_embd] without leaving the backend: the gate (+ bias), its softmax where
// that is the gating, and Backend::select_experts (which takes the sigmoid, or the softmax of the
// chosen logits, itself), into selected / weights [n_tokens, n_expert_used] (backend memory).
// Only when selects_on_backend; no trace (the probabilities never reach the host).
void route_tokens_on_backend(Backend& backend, const RouterWeights& w, const RouterConfig& config,
                             int64_t layer, const float* x, int64_t n_tokens,
                             RouterScratch& scratch, int32_t* selected, float* weights);

}  // namespace sluice::model
