// The router, step by step in llama.cpp's order.
#include "model/blocks/router.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace sluice::model {
namespace {

// Indices of the k largest of scores[0..n), best first, as ggml's argsort (descending,
// std::sort over all indices) followed by a view of the first k.
void sort_descending(const float* scores, int64_t n, std::vector<int32_t>& order) {
  order.resize(size_t(n));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [scores](int32_t a, int32_t b) { return scores[a] > scores[b]; });
}

// Keeps only the n_group_used groups whose two best scores sum highest (DeepSeek V3's
// group-limited routing); the others' scores become -inf.
void mask_groups(float* selection, const RouterConfig& c, RouterScratch& s) {
  const int64_t per_group = c.n_expert / c.n_group;
  s.group_scores.resize(size_t(c.n_group));
  for (int64_t g = 0; g < c.n_group; ++g) {
    const float* group = selection + g * per_group;
    sort_descending(group, per_group, s.order);
    // ggml_sum_rows: a double sum stored as float.
    s.group_scores[size_t(g)] = float(double(group[s.order[0]]) + double(group[s.order[1]]));
  }
  sort_descending(s.group_scores.data(), c.n_group, s.order);
  for (int64_t g = 0; g < c.n_group; ++g) {
    const auto kept = s.order.begin() + c.n_group_used;
    if (std::find(s.order.begin(), kept, int32_t(g)) != kept) continue;
    std::fill(selection + g * per_group, selection + (g + 1) * per_group, -INFINITY);
  }
}

void weigh(const float* probs, const RouterConfig& c, const int32_t* chosen, float* weights) {
  const int64_t k = c.n_expert_used;
  for (int64_t i = 0; i < k; ++i) weights[i] = probs[chosen[i]];
  if (c.gating == ExpertGating::kSoftmaxWeight) {
    float max = -INFINITY;
    for (int64_t i = 0; i < k; ++i) max = std::fmax(max, weights[i]);
    double sum = 0.0;
    for (int64_t i = 0; i < k; ++i) {
      weights[i] = std::exp(weights[i] - max);
      sum += double(weights[i]);
    }
    const float inv = float(1.0 / sum);
    for (int64_t i = 0; i < k; ++i) weights[i] *= inv;
  }
  if (c.norm_weights) {
    double sum = 0.0;
    for (int64_t i = 0; i < k; ++i) sum += double(weights[i]);
    // Clamped to the smallest normal half, as llama.cpp does against a zero sum.
    const float total = std::max(float(sum), 6.103515625e-5f);
    for (int64_t i = 0; i < k; ++i) weights[i] /= total;
  }
  if (c.weights_scale != 0.0f && c.weights_scale != 1.0f) {
    for (int64_t i = 0; i < k; ++i) weights[i] *= c.weights_scale;
  }
}

}  // namespace

void RouterScratch::reserve(Backend& backend, const RouterConfig& c, int64_t n_batch) {
  logits.resize(backend, size_t(n_batch * c.n_expert));
  probs.resize(size_t(n_batch * c.n_expert));
  selection.resize(size_t(c.n_expert));
  order.reserve(size_t(c.n_expert));
  group_scores.reserve(size_t(std::max<int64_t>(c.n_group, 1)));
  selected.resize(size_t(n_batch * c.n_expert_used));
  weights.resize(size_t(n_batch * c.n_expert_used));
}

void route_tokens(Backend& backend, const RouterWeights& w, const RouterConfig& c, int64_t layer,
                  const float* x, int64_t n_tokens, RouterScratch& s, const Trace& trace) {
  float* logits = s.logits.data();
  backend.matmul(w.gate, x, logits, n_tokens);
  trace("ffn_moe_logits", layer, logits, c.n_expert);
  if (!w.gate_bias.empty()) {
    backend.add_bias(logits, w.gate_bias.data(), n_tokens, c.n_expert);
    trace("ffn_moe_logits_biased", layer, logits, c.n_expert);
  }
  if (c.gating == ExpertGating::kSoftmax) backend.softmax_rows(logits, n_tokens, c.n_expert);
  float* probs = s.probs.data();
  backend.download(probs, logits, size_t(n_tokens * c.n_expert) * sizeof(float));
  Trace host_trace = trace;
  host_trace.backend = nullptr;
  if (c.gating == ExpertGating::kSigmoid) {
    for (int64_t i = 0; i < n_tokens * c.n_expert; ++i)
      probs[i] = 1.0f / (1.0f + std::exp(-probs[i]));
  } else if (c.gating == ExpertGating::kSqrtSoftplus) {
    // ggml's softplus (linear above 20), then its sqrt.
    for (int64_t i = 0; i < n_tokens * c.n_expert; ++i) {
      const float x = probs[i];
      probs[i] = std::sqrt(x > 20.0f ? x : std::log(1.0f + std::exp(x)));
    }
  }
  host_trace("ffn_moe_probs", layer, probs, c.n_expert);

  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* token_probs = probs + t * c.n_expert;
    int32_t* chosen = s.selected.data() + t * c.n_expert_used;
    if (s.given != nullptr) {
      std::copy_n(s.given + t * c.n_expert_used, c.n_expert_used, chosen);
      weigh(token_probs, c, chosen, s.weights.data() + t * c.n_expert_used);
      continue;
    }
    float* selection = s.selection.data();
    for (int64_t e = 0; e < c.n_expert; ++e) {
      selection[e] =
          token_probs[e] + (w.selection_bias.empty() ? 0.0f : w.selection_bias[size_t(e)]);
    }
    if (c.n_group > 1) mask_groups(selection, c, s);
    sort_descending(selection, c.n_expert, s.order);
    std::copy_n(s.order.begin(), c.n_expert_used, chosen);
    weigh(token_probs, c, chosen, s.weights.data() + t * c.n_expert_used);
  }
}

}  // namespace sluice::model
