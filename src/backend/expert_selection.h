// The routed experts' selection from a router's probabilities, exactly as llama.cpp's
// build_moe_ffn makes it: an optional selection bias (DeepSeek V3's exp_probs_b: it changes which
// experts win, not their weights), group-limited selection, a descending sort of the scores,
// then the chosen probabilities as weights, optionally normalised and scaled. The host reference
// of Backend::select_experts (a GPU backend selects on the device; it must choose and weigh
// alike). Knows no model.
#pragma once

#include <cstdint>
#include <vector>

namespace sluice {

struct ExpertSelection {
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;  // k
  int64_t n_group = 0;        // > 1: experts in n_group groups, only n_group_used groups eligible
  int64_t n_group_used = 0;
  bool norm_weights = false;   // divide the chosen weights by their sum
  float weights_scale = 0.0f;  // 0 or 1: no scaling
};

// Reusable buffers of one selection (no allocation per token once grown).
struct SelectionScratch {
  std::vector<float> scores;        // [n_expert]
  std::vector<int32_t> order;       // [n_expert]
  std::vector<float> group_scores;  // [n_group]
};

// The k best experts of one token's probs [n_expert] (+ bias [n_expert] when not nullptr), best
// first, ties broken as std::sort breaks them in ggml's argsort (a GPU may differ on exact ties).
void select_top_experts(const float* probs, const float* bias, const ExpertSelection& s,
                        SelectionScratch& scratch, int32_t* chosen);

// weights[c] = probs[chosen[c]] for c < k; if softmax_chosen (gpt-oss), their softmax; then
// normalised (sum in double, clamped to the smallest normal half against a zero sum, as llama.cpp
// does) and scaled as `s` says.
void weigh_chosen_experts(const float* probs, const int32_t* chosen, const ExpertSelection& s,
                          bool softmax_chosen, float* weights);

}  // namespace sluice
