// Sampler: logits → the next token id, as llama.cpp's default chain chooses it (logit bias,
// penalties, then greedy, or top-k → typical → top-p → min-p → temperature → a seeded draw).
// A pure function of (logits, history, params, RNG state): no clocks, no globals, and no heap
// allocation per token, because it runs inside the token loop. Knows nothing of models,
// tokenizers or sessions; the caller decides which ids count as history.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "sluice/engine.h"

namespace sluice::runtime {

// Throws sluice::Error naming the first invalid field and its value: top_p or typical_p outside
// (0, 1], min_p outside [0, 1], penalty_last_n < 0, repeat_penalty <= 0, non-finite presence or
// frequency penalty, a logit_bias id outside [0, n_vocab) or a bias that is NaN or +inf (-inf
// bans a token). Any temperature is accepted: <= 0 or NaN means greedy.
void validate_sampling_params(const SamplingParams& params, int64_t n_vocab);

class Sampler {
 public:
  // Validates `params` and sizes every scratch buffer for `n_vocab` logits.
  Sampler(const SamplingParams& params, int64_t n_vocab);

  // Chooses the next token from logits[n_vocab]. `history` holds the ids generated (and, if
  // the caller wants them penalized, committed) so far, oldest first; the penalties look at its
  // last params.penalty_last_n entries. Ids in it outside the vocabulary are ignored.
  int32_t sample(const float* logits, std::span<const int32_t> history);

  // Restarts the random sequence as if constructed with `seed`.
  void reseed(uint64_t seed);

  int64_t n_vocab() const { return n_vocab_; }

  struct Candidate {
    int32_t id;
    float logit;
    float p;  // probability among the candidates still kept; set by the stages that need it
  };

 private:
  void apply_bias_and_penalties(std::span<const int32_t> history);
  int32_t draw(size_t n_kept);
  double next_uniform();  // [0, 1), 53 random bits

  SamplingParams params_;
  int64_t n_vocab_;
  std::vector<std::pair<int32_t, float>> bias_;  // logit_bias flattened, ascending id
  std::vector<Candidate> candidates_;            // [n_vocab] working set, shrinks per stage
  std::vector<Candidate> reorder_;               // [n_vocab] typical-p output order
  std::vector<float> typical_score_;             // [n_vocab] |-log p - entropy| per candidate
  std::vector<int32_t> typical_order_;           // [n_vocab] candidate positions by score
  std::vector<int32_t> window_count_;            // [n_vocab] occurrences in the penalty window
  std::mt19937_64 rng_;
};

}  // namespace sluice::runtime
