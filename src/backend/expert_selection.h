// The routed experts' selection from a router's probabilities, exactly as llama.cpp's
// build_moe_ffn makes it: an optional selection bias (DeepSeek V3's exp_probs_b: it changes which
// experts win, not their weights), group-limited selection, a descending sort of the scores,
// then the chosen probabilities as weights, optionally normalised and scaled. The host reference
// of Backend::select_experts (a GPU backend selects on the device; it must choose and weigh
// alike), which also turns a router's logits into its scores (ExpertScoring). Knows no model.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace sluice {

// What the rows given to Backend::select_experts hold, and how the weights come from them.
enum class ExpertScoring : uint8_t {
  kProbabilities,  // probabilities (the router's softmax): chosen on them, weighed by them
  kSigmoid,        // logits: probabilities = sigmoid_probability(logit), then as kProbabilities
                   // (DeepSeek V3, GLM-4.5, Laguna)
  kSoftmaxChosen,  // logits: chosen on them, weights = the softmax of the k chosen (gpt-oss)
  kSoftmax,        // logits: probabilities = the backend's softmax_rows of the row (ggml's
             // soft_max, not softmax_row below), then as kProbabilities (Qwen3 MoE, OLMoE…):
             // softmax_rows then select_experts in one op
};

struct ExpertSelection {
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;  // k
  int64_t n_group = 0;        // > 1: experts in n_group groups, only n_group_used groups eligible
  int64_t n_group_used = 0;
  bool norm_weights = false;                              // divide the chosen weights by their sum
  float weights_scale = 0.0f;                             // 0 or 1: no scaling
  ExpertScoring scoring = ExpertScoring::kProbabilities;  // select_and_weigh_experts' input
};

// Reusable buffers of one selection (no allocation per token once grown).
struct SelectionScratch {
  std::vector<float> scores;        // [n_expert]
  std::vector<int32_t> order;       // [n_expert]
  std::vector<float> group_scores;  // [n_group]
  std::vector<float> probs;         // [n_expert] a row's sigmoid probabilities
};

// ggml's sigmoid of a router logit, as the host router computes it: 1 / (1 + exp(-x)) in float.
inline float sigmoid_probability(float logit) {
  return 1.0f / (1.0f + std::exp(-logit));
}

// The k best experts of one token's probs [n_expert] (+ bias [n_expert] when not nullptr), best
// first, ties broken as std::sort breaks them in ggml's argsort (a GPU may differ on exact ties).
void select_top_experts(const float* probs, const float* bias, const ExpertSelection& s,
                        SelectionScratch& scratch, int32_t* chosen);

// x [n] becomes its softmax as ggml_soft_max computes a row: exp(x - max) with libm's expf,
// summed in double, each times float(1 / sum). (Also the deepseek4 hyper-connections' rows.)
void softmax_row(float* x, int64_t n);

// weights[c] = probs[chosen[c]] for c < k; if softmax_chosen (gpt-oss), their softmax; then
// normalised (sum in double, clamped to the smallest normal half against a zero sum, as llama.cpp
// does) and scaled as `s` says.
void weigh_chosen_experts(const float* probs, const int32_t* chosen, const ExpertSelection& s,
                          bool softmax_chosen, float* weights);

// One token's whole selection from its row [n_expert] as s.scoring says (the reference of
// Backend::select_experts): the probabilities (sigmoid of the row for kSigmoid, the row itself
// otherwise), select_top_experts on them (+ bias), weigh_chosen_experts (softmax_chosen for
// kSoftmaxChosen) into chosen and weights [n_expert_used]. kSoftmax is the backend's to apply
// first (its softmax_rows); here it fails.
void select_and_weigh_experts(const float* row, const float* bias, const ExpertSelection& s,
                              SelectionScratch& scratch, int32_t* chosen, float* weights);

}  // namespace sluice
