// The selection, step by step in llama.cpp's order.
#include "backend/expert_selection.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace sluice {
namespace {

// Indices of scores[0..n) sorted best first, as ggml's argsort (descending, std::sort over all
// indices) followed by a view of the first k.
void sort_descending(const float* scores, int64_t n, std::vector<int32_t>& order) {
  order.resize(size_t(n));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [scores](int32_t a, int32_t b) { return scores[a] > scores[b]; });
}

// Keeps only the n_group_used groups whose two best scores sum highest (DeepSeek V3's
// group-limited routing); the others' scores become -inf.
void mask_groups(float* scores, const ExpertSelection& s, SelectionScratch& scratch) {
  const int64_t per_group = s.n_expert / s.n_group;
  scratch.group_scores.resize(size_t(s.n_group));
  for (int64_t g = 0; g < s.n_group; ++g) {
    const float* group = scores + g * per_group;
    sort_descending(group, per_group, scratch.order);
    // ggml_sum_rows: a double sum stored as float.
    scratch.group_scores[size_t(g)] =
        float(double(group[scratch.order[0]]) + double(group[scratch.order[1]]));
  }
  sort_descending(scratch.group_scores.data(), s.n_group, scratch.order);
  for (int64_t g = 0; g < s.n_group; ++g) {
    const auto kept = scratch.order.begin() + s.n_group_used;
    if (std::find(scratch.order.begin(), kept, int32_t(g)) != kept) continue;
    std::fill(scores + g * per_group, scores + (g + 1) * per_group, -INFINITY);
  }
}

}  // namespace

void select_top_experts(const float* probs, const float* bias, const ExpertSelection& s,
                        SelectionScratch& scratch, int32_t* chosen) {
  scratch.scores.resize(size_t(s.n_expert));
  float* scores = scratch.scores.data();
  for (int64_t e = 0; e < s.n_expert; ++e) scores[e] = probs[e] + (bias ? bias[e] : 0.0f);
  if (s.n_group > 1) mask_groups(scores, s, scratch);
  sort_descending(scores, s.n_expert, scratch.order);
  std::copy_n(scratch.order.begin(), s.n_expert_used, chosen);
}

void softmax_row(float* x, int64_t n) {
  float max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max = std::fmax(max, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += double(x[i]);
  }
  const float inv = float(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void weigh_chosen_experts(const float* probs, const int32_t* chosen, const ExpertSelection& s,
                          bool softmax_chosen, float* weights) {
  const int64_t k = s.n_expert_used;
  for (int64_t i = 0; i < k; ++i) weights[i] = probs[chosen[i]];
  if (softmax_chosen) softmax_row(weights, k);
  if (s.norm_weights) {
    double sum = 0.0;
    for (int64_t i = 0; i < k; ++i) sum += double(weights[i]);
    // Clamped to the smallest normal half, as llama.cpp does against a zero sum.
    const float total = std::max(float(sum), 6.103515625e-5f);
    for (int64_t i = 0; i < k; ++i) weights[i] /= total;
  }
  if (s.weights_scale != 0.0f && s.weights_scale != 1.0f) {
    for (int64_t i = 0; i < k; ++i) weights[i] *= s.weights_scale;
  }
}

void select_and_weigh_experts(const float* row, const float* bias, const ExpertSelection& s,
                              SelectionScratch& scratch, int32_t* chosen, float* weights) {
  if (s.scoring == ExpertScoring::kSoftmax) {
    fail("select_and_weigh_experts: the softmax scoring is the backend's (softmax_rows first)");
  }
  const float* probs = row;
  if (s.scoring == ExpertScoring::kSigmoid) {
    scratch.probs.resize(size_t(s.n_expert));
    for (int64_t e = 0; e < s.n_expert; ++e) scratch.probs[size_t(e)] = sigmoid_probability(row[e]);
    probs = scratch.probs.data();
  }
  select_top_experts(probs, bias, s, scratch, chosen);
  weigh_chosen_experts(probs, chosen, s, s.scoring == ExpertScoring::kSoftmaxChosen, weights);
}

}  // namespace sluice
