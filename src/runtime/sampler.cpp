// The sampler chain of sampler.h, stage by stage as llama.cpp's samplers define them
// (src/llama-sampling.cpp, chain order from common/sampling.cpp). Where llama.cpp leaves an
// order to std::sort or a distribution to the standard library, this file fixes it (ties go to
// the lower id; uniform doubles are built from raw mt19937_64 bits), so the same seed gives the
// same tokens with any compiler and library.
#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace sluice::runtime {
namespace {

using Candidate = Sampler::Candidate;
constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// A strict total order (higher logit first, then lower id): sorting never depends on the
// library's algorithm, and top-k = 1 picks exactly the greedy token.
bool ranks_higher(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

float max_logit(std::span<const Candidate> kept) {
  float max = kMinusInf;
  for (const Candidate& c : kept) max = std::max(max, c.logit);
  return max;
}

// p = softmax(logit) over the kept candidates, in float as llama.cpp computes it. When the
// largest logit is infinite the mass sits evenly on the tokens at it (exp would give NaN).
void softmax(std::span<Candidate> kept) {
  const float max = max_logit(kept);
  if (!std::isfinite(max)) {
    float n_at_max = 0;
    for (const Candidate& c : kept) n_at_max += c.logit == max ? 1.0f : 0.0f;
    for (Candidate& c : kept) c.p = c.logit == max ? 1.0f / n_at_max : 0.0f;
    return;
  }
  float sum = 0;
  for (Candidate& c : kept) {
    c.p = std::exp(c.logit - max);
    sum += c.p;
  }
  for (Candidate& c : kept) c.p /= sum;
}

// Keeps the k highest; k <= 0 (or >= the count) keeps everything, as llama.cpp's top-k does.
size_t top_k(std::span<Candidate> kept, int32_t k, bool& sorted) {
  if (k <= 0 || static_cast<size_t>(k) >= kept.size()) return kept.size();
  std::partial_sort(kept.begin(), kept.begin() + k, kept.end(), ranks_higher);
  sorted = true;
  return static_cast<size_t>(k);
}

// Locally typical sampling: rank tokens by how far their surprisal (-log p) is from the
// entropy, keep the closest until their mass exceeds p (>, as llama.cpp). The kept tokens end up
// in that rank order. Zero-probability tokens add nothing to the entropy (the limit of p log p)
// and rank last; llama.cpp would turn both into NaN.
size_t typical_p(std::span<Candidate> kept, float p, bool& sorted, std::span<float> score,
                 std::span<int32_t> order, std::span<Candidate> reorder) {
  if (!sorted) std::sort(kept.begin(), kept.end(), ranks_higher);
  softmax(kept);
  float entropy = 0;
  for (const Candidate& c : kept) {
    if (c.p > 0) entropy += -c.p * std::log(c.p);
  }
  const size_t n = kept.size();
  for (size_t i = 0; i < n; ++i) {
    score[i] = kept[i].p > 0 ? std::fabs(-std::log(kept[i].p) - entropy)
                             : std::numeric_limits<float>::infinity();
    order[i] = static_cast<int32_t>(i);
  }
  std::sort(
      order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n),
      [&](int32_t a, int32_t b) { return score[a] < score[b] || (score[a] == score[b] && a < b); });
  size_t n_kept = n;
  float cumulative = 0;
  for (size_t i = 0; i < n; ++i) {
    cumulative += kept[order[i]].p;
    if (cumulative > p) {
      n_kept = i + 1;
      break;
    }
  }
  for (size_t i = 0; i < n_kept; ++i) reorder[i] = kept[order[i]];
  std::copy(reorder.begin(), reorder.begin() + static_cast<std::ptrdiff_t>(n_kept), kept.begin());
  sorted = false;
  return n_kept;
}

// The length of a head of `kept`, in ranks_higher order, that surely reaches mass p, moved to
// the front (unordered): halving with nth_element until under 256 tokens are in doubt. O(n)
// where a full sort of a large vocabulary would cost tens of milliseconds per token.
size_t head_reaching(std::span<Candidate> kept, float p) {
  size_t lo = 0;  // [0, lo) all rank above [lo, hi), which all rank above [hi, n)
  size_t hi = kept.size();
  float mass_above = 0;  // of [0, lo)
  while (hi - lo > 256) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(kept.begin() + lo, kept.begin() + mid, kept.begin() + hi, ranks_higher);
    float mass = 0;
    for (size_t i = lo; i < mid; ++i) mass += kept[i].p;
    if (mass_above + mass >= p) {
      hi = mid;
    } else {
      mass_above += mass;
      lo = mid;
    }
  }
  return hi;
}

// Keeps the smallest prefix, by descending probability, whose mass reaches p (>=, as
// llama.cpp). Only the head that can matter is sorted; the kept tokens end up fully sorted, so
// the draw sees them in an order no standard library can change.
size_t top_p(std::span<Candidate> kept, float p, bool& sorted) {
  softmax(kept);
  size_t n_sorted = kept.size();
  if (!sorted) {
    n_sorted = head_reaching(kept, p);
    std::sort(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(n_sorted), ranks_higher);
  }
  sorted = true;
  float cumulative = 0;
  for (size_t i = 0; i < kept.size(); ++i) {
    if (i == n_sorted) {  // summing in order fell short of the blockwise estimate: sort on
      std::sort(kept.begin() + static_cast<std::ptrdiff_t>(n_sorted), kept.end(), ranks_higher);
      n_sorted = kept.size();
    }
    cumulative += kept[i].p;
    if (cumulative >= p) return i + 1;
  }
  return kept.size();
}

// Keeps tokens whose probability is at least min_p times the largest, compared on logits
// (logit >= max + log(min_p)) as llama.cpp does; order is preserved.
size_t min_p(std::span<Candidate> kept, float p) {
  const float threshold = max_logit(kept) + std::log(p);
  size_t n = 0;
  for (const Candidate& c : kept) {
    if (c.logit >= threshold) kept[n++] = c;
  }
  return n;
}

}  // namespace

void validate_sampling_params(const SamplingParams& params, int64_t n_vocab) {
  if (n_vocab <= 0 || n_vocab > std::numeric_limits<int32_t>::max()) {
    fail("sampling: the vocabulary size must be in [1, 2^31), got ", n_vocab);
  }
  // Written as !(in range) so NaN fails too.
  if (!(params.top_p > 0.0f && params.top_p <= 1.0f)) {
    fail("sampling: top_p must be in (0, 1], got ", params.top_p);
  }
  if (!(params.min_p >= 0.0f && params.min_p <= 1.0f)) {
    fail("sampling: min_p must be in [0, 1], got ", params.min_p);
  }
  if (!(params.typical_p > 0.0f && params.typical_p <= 1.0f)) {
    fail("sampling: typical_p must be in (0, 1], got ", params.typical_p);
  }
  if (params.penalty_last_n < 0) {
    fail("sampling: penalty_last_n must be >= 0, got ", params.penalty_last_n);
  }
  if (!(params.repeat_penalty > 0.0f) || std::isinf(params.repeat_penalty)) {
    fail("sampling: repeat_penalty must be positive and finite, got ", params.repeat_penalty);
  }
  if (!std::isfinite(params.presence_penalty)) {
    fail("sampling: presence_penalty must be finite, got ", params.presence_penalty);
  }
  if (!std::isfinite(params.frequency_penalty)) {
    fail("sampling: frequency_penalty must be finite, got ", params.frequency_penalty);
  }
  for (const auto& [id, bias] : params.logit_bias) {
    if (id < 0 || id >= n_vocab) {
      fail("sampling: logit_bias token id ", id, " is outside the vocabulary (", n_vocab,
           " tokens)");
    }
    // -inf is the usual way to ban a token; +inf or NaN would make every probability NaN.
    if (std::isnan(bias) || bias == std::numeric_limits<float>::infinity()) {
      fail("sampling: logit_bias for token ", id, " must be a number or -inf, got ", bias);
    }
  }
}

Sampler::Sampler(const SamplingParams& params, int64_t n_vocab)
    : params_(params), n_vocab_(n_vocab), rng_(params.seed) {
  validate_sampling_params(params, n_vocab);
  const auto n = static_cast<size_t>(n_vocab);
  bias_.assign(params.logit_bias.begin(), params.logit_bias.end());
  candidates_.resize(n);
  reorder_.resize(n);
  typical_score_.resize(n);
  typical_order_.resize(n);
  window_count_.assign(n, 0);
}

int32_t Sampler::sample(const float* logits, std::span<const int32_t> history) {
  // NaN logits become -inf: a NaN can never be chosen and the sort order stays total.
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const float logit = logits[i];
    candidates_[i] = {static_cast<int32_t>(i), std::isnan(logit) ? kMinusInf : logit, 0.0f};
  }
  apply_bias_and_penalties(history);

  if (!(params_.temperature > 0.0f)) {  // <= 0 or NaN: greedy, ties to the lowest id
    size_t best = 0;
    for (size_t i = 1; i < candidates_.size(); ++i) {
      if (candidates_[i].logit > candidates_[best].logit) best = i;
    }
    return candidates_[best].id;
  }

  // llama.cpp's default chain order; each stage keeps at least one token.
  std::span<Candidate> kept(candidates_);
  bool sorted = false;
  kept = kept.first(top_k(kept, params_.top_k, sorted));
  if (params_.typical_p < 1.0f) {
    kept = kept.first(
        typical_p(kept, params_.typical_p, sorted, typical_score_, typical_order_, reorder_));
  }
  if (params_.top_p < 1.0f) kept = kept.first(top_p(kept, params_.top_p, sorted));
  if (params_.min_p > 0.0f) kept = kept.first(min_p(kept, params_.min_p));
  return draw(kept.size());
}

// Logit bias first, then the penalties, in llama.cpp's chain order (it matters: the repeat
// penalty divides or multiplies the biased logit). Candidates are still indexed by id here.
void Sampler::apply_bias_and_penalties(std::span<const int32_t> history) {
  for (const auto& [id, bias] : bias_) candidates_[static_cast<size_t>(id)].logit += bias;

  const bool penalties_off = params_.repeat_penalty == 1.0f && params_.frequency_penalty == 0.0f &&
                             params_.presence_penalty == 0.0f;
  if (params_.penalty_last_n == 0 || penalties_off) return;
  const size_t n_window = std::min(history.size(), static_cast<size_t>(params_.penalty_last_n));
  const std::span<const int32_t> window = history.last(n_window);
  for (const int32_t id : window) {
    if (id >= 0 && id < n_vocab_) ++window_count_[static_cast<size_t>(id)];
  }
  // Each distinct id is penalized once, at its first appearance; zeroing its count there also
  // leaves window_count_ clean for the next call without a pass over the vocabulary.
  for (const int32_t id : window) {
    if (id < 0 || id >= n_vocab_ || window_count_[static_cast<size_t>(id)] == 0) continue;
    int32_t& count = window_count_[static_cast<size_t>(id)];
    float& logit = candidates_[static_cast<size_t>(id)].logit;
    // Dividing a negative logit would raise its probability; llama.cpp multiplies those.
    logit = logit <= 0.0f ? logit * params_.repeat_penalty : logit / params_.repeat_penalty;
    logit -= static_cast<float>(count) * params_.frequency_penalty +
             static_cast<float>(count > 0) * params_.presence_penalty;
    count = 0;
  }
}

// Temperature, softmax and one draw over the kept candidates in their current order, as
// llama.cpp's dist sampler: float exponentials, a double running sum, target = sum * u. One
// uniform is consumed per call even when a single token is left, so the random stream stays
// aligned with token positions. A token is taken only once the running sum exceeds the target
// (llama.cpp: reaches it), so a token whose probability underflowed to 0 is never drawn.
int32_t Sampler::draw(size_t n_kept) {
  const std::span<Candidate> kept = std::span(candidates_).first(n_kept);
  const double u = next_uniform();
  const float max = max_logit(kept);
  if (!std::isfinite(max)) {  // everything banned, or an infinite logit: take the lowest id at it
    int32_t id = std::numeric_limits<int32_t>::max();
    for (const Candidate& c : kept) {
      if (c.logit == max) id = std::min(id, c.id);
    }
    return id;
  }
  // (logit - max) / T rather than logit / T - max / T: the same distribution, but a tiny T
  // cannot overflow to inf - inf.
  const float temperature = params_.temperature;
  double sum = 0;
  for (Candidate& c : kept) {
    c.p = c.logit == kMinusInf ? 0.0f : std::exp((c.logit - max) / temperature);
    sum += c.p;
  }
  const double target = sum * u;
  double running = 0;
  size_t last_positive = 0;
  for (size_t i = 0; i < kept.size(); ++i) {
    if (kept[i].p <= 0.0f) continue;
    running += kept[i].p;
    last_positive = i;
    if (running > target) return kept[i].id;
  }
  return kept[last_positive].id;  // rounding left the target unreached
}

void Sampler::reseed(uint64_t seed) {
  rng_.seed(seed);
}

double Sampler::next_uniform() {
  // The top 53 bits of one 64-bit output, scaled: exact, portable, and never 1.0.
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

}  // namespace sluice::runtime
