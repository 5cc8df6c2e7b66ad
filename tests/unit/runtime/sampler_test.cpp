// Sampler against hand-checked numbers: greedy ties, logit bias, each penalty's arithmetic (read
// back exactly through greedy ties), the cut sets of top-k/typical/top-p/min-p (by sampling with
// many seeds), the drawn distribution against softmax, seeding, and parameter validation.
#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "sluice/error.h"

namespace sluice::runtime {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

int32_t sample_once(const SamplingParams& params, const std::vector<float>& logits,
                    const std::vector<int32_t>& history = {}) {
  Sampler sampler(params, static_cast<int64_t>(logits.size()));
  return sampler.sample(logits.data(), history);
}

// The ids drawn from `logits` with seeds 1..n_seeds (a fresh sampler each).
std::set<int32_t> ids_drawn(SamplingParams params, const std::vector<float>& logits,
                            int n_seeds = 2000) {
  std::set<int32_t> ids;
  for (int seed = 1; seed <= n_seeds; ++seed) {
    params.seed = static_cast<uint64_t>(seed);
    ids.insert(sample_once(params, logits));
  }
  return ids;
}

// log of the probabilities {0.5, 0.3, 0.15, 0.05}, placed at ids 2, 0, 3, 1 so that no stage can
// pass by keeping ids in order.
const std::vector<float> kFourTokens = {std::log(0.3f), std::log(0.05f), std::log(0.5f),
                                        std::log(0.15f)};

SamplingParams stochastic(float temperature = 1.0f) {
  SamplingParams params;
  params.temperature = temperature;
  return params;
}

// Reads back, exactly, the logit the bias and penalty stages leave for token 1 (raw logit `raw`,
// history `history`): greedy breaks ties toward the lower id, so with a rival worth `expected`
// at id 0 token 1 loses unless it is above `expected`, and with the rival at id 2 it wins unless
// it is below. Both hold only when it equals `expected`.
void expect_adjusted_logit(const SamplingParams& params, float raw,
                           const std::vector<int32_t>& history, float expected) {
  const float low = -1e9f;
  EXPECT_EQ(sample_once(params, {expected, raw, low, low}, history), 0)
      << "token 1 ended above " << expected;
  EXPECT_EQ(sample_once(params, {low, raw, expected, low}, history), 1)
      << "token 1 ended below " << expected;
}

TEST(Sampler, GreedyIsArgmaxWithTiesToTheLowestId) {
  EXPECT_EQ(sample_once({}, {1.0f, 3.0f, -2.0f, 2.5f}), 1);
  EXPECT_EQ(sample_once({}, {1.0f, 3.0f, 2.0f, 3.0f}), 1);
  EXPECT_EQ(sample_once({}, {-kInf, -kInf, -kInf}), 0);
  for (float temperature : {0.0f, -1.0f, std::nanf("")}) {
    SamplingParams params;
    params.temperature = temperature;
    params.seed = 7;
    EXPECT_EQ(sample_once(params, {0.5f, 0.25f, 0.5f, 0.1f}), 0) << temperature;
  }
}

TEST(Sampler, GreedyNeverPicksANanLogit) {
  EXPECT_EQ(sample_once({}, {std::nanf(""), 1.0f, std::nanf(""), 2.0f}), 3);
}

TEST(Sampler, LogitBiasCanFlipTheArgmaxAndBanTokens) {
  SamplingParams params;
  params.logit_bias = {{0, 2.5f}};
  EXPECT_EQ(sample_once(params, {1.0f, 3.0f, 2.0f}), 0);  // 1 + 2.5 > 3
  params.logit_bias = {{0, 1.5f}};
  EXPECT_EQ(sample_once(params, {1.0f, 3.0f, 2.0f}), 1);  // 1 + 1.5 < 3
  params.logit_bias = {{1, -kInf}};
  EXPECT_EQ(sample_once(params, {1.0f, 3.0f, 2.0f}), 2);
  params = stochastic();
  params.logit_bias = {{1, -kInf}, {2, -kInf}};
  EXPECT_EQ(ids_drawn(params, {0.0f, 5.0f, 5.0f}, 200), (std::set<int32_t>{0}));
}

TEST(Sampler, RepeatPenaltyDividesPositiveAndMultipliesNegativeLogitsOnce) {
  SamplingParams params;
  params.repeat_penalty = 1.5f;
  expect_adjusted_logit(params, 3.0f, {1}, 2.0f);        // 3 / 1.5
  expect_adjusted_logit(params, 3.0f, {1, 1, 1}, 2.0f);  // once, however often it occurred
  expect_adjusted_logit(params, -3.0f, {1}, -4.5f);      // -3 * 1.5
  expect_adjusted_logit(params, 3.0f, {3}, 3.0f);        // not in the history: untouched
}

TEST(Sampler, FrequencyPenaltySubtractsCountTimesPenalty) {
  SamplingParams params;
  params.frequency_penalty = 0.25f;
  expect_adjusted_logit(params, 1.0f, {1, 3, 1, 1}, 0.25f);  // 1 - 3 * 0.25
  expect_adjusted_logit(params, -1.0f, {1}, -1.25f);
}

TEST(Sampler, PresencePenaltySubtractsOnceWhateverTheCount) {
  SamplingParams params;
  params.presence_penalty = 0.5f;
  expect_adjusted_logit(params, 1.0f, {1, 1, 1}, 0.5f);
  expect_adjusted_logit(params, 1.0f, {3}, 1.0f);
}

TEST(Sampler, PenaltiesCombineAfterTheBiasAndOnlyOverTheWindow) {
  SamplingParams params;
  params.repeat_penalty = 1.5f;
  params.frequency_penalty = 0.25f;
  params.presence_penalty = 0.5f;
  expect_adjusted_logit(params, 3.0f, {1, 1}, 1.0f);  // 3 / 1.5 - (2 * 0.25 + 0.5)
  params.penalty_last_n = 3;  // the window is {1, 3, 3}: token 1 counted once
  expect_adjusted_logit(params, 3.0f, {1, 1, 1, 3, 3}, 1.25f);
  params.penalty_last_n = 2;  // {3, 3}: token 1 is out of the window
  expect_adjusted_logit(params, 3.0f, {1, 1, 1, 3, 3}, 3.0f);
  params.penalty_last_n = 0;  // off
  expect_adjusted_logit(params, 3.0f, {1, 1}, 3.0f);

  SamplingParams biased;
  biased.repeat_penalty = 2.0f;
  biased.logit_bias = {{1, 3.0f}};
  expect_adjusted_logit(biased, 1.0f, {1}, 2.0f);  // (1 + 3) / 2, not 1 / 2 + 3
}

TEST(Sampler, PenaltiesIgnoreIdsOutsideTheVocabularyAndDoNotLeakIntoTheNextCall) {
  SamplingParams params;
  params.frequency_penalty = 1.0f;
  Sampler sampler(params, 3);
  const std::vector<float> logits = {1.0f, 1.5f, 0.0f};
  const std::vector<int32_t> history = {-1, 1, 99};
  EXPECT_EQ(sampler.sample(logits.data(), history), 0);  // 1.5 - 1 < 1
  EXPECT_EQ(sampler.sample(logits.data(), {}), 1);       // a fresh count each call
}

TEST(Sampler, TopKOfOneIsGreedyAtAnyTemperature) {
  std::vector<float> logits(50);
  for (size_t i = 0; i < logits.size(); ++i) {
    logits[i] = std::sin(static_cast<float>(i) * 1.7f) * 3.0f;
  }
  logits[17] = logits[41] = 3.5f;  // a tie at the top: both rules give the lower id
  const int32_t greedy = sample_once({}, logits);
  ASSERT_EQ(greedy, 17);
  for (float temperature : {0.3f, 1.0f, 5.0f, 100.0f}) {
    SamplingParams params = stochastic(temperature);
    params.top_k = 1;
    EXPECT_EQ(ids_drawn(params, logits, 300), (std::set<int32_t>{greedy})) << temperature;
  }
}

TEST(Sampler, TopKKeepsTheKMostLikely) {
  SamplingParams params = stochastic();
  params.top_k = 2;
  EXPECT_EQ(ids_drawn(params, kFourTokens), (std::set<int32_t>{2, 0}));
  params.top_k = 3;
  EXPECT_EQ(ids_drawn(params, kFourTokens), (std::set<int32_t>{2, 0, 3}));
}

TEST(Sampler, TopPKeepsTheSmallestHeadReachingP) {
  SamplingParams params = stochastic();
  params.top_p = 0.75f;  // 0.5, then 0.8 >= 0.75
  EXPECT_EQ(ids_drawn(params, kFourTokens), (std::set<int32_t>{2, 0}));
  params.top_p = 0.9f;  // 0.5, 0.8, 0.95
  EXPECT_EQ(ids_drawn(params, kFourTokens), (std::set<int32_t>{2, 0, 3}));
  params.top_p = 0.2f;  // the most likely token alone
  EXPECT_EQ(ids_drawn(params, kFourTokens, 300), (std::set<int32_t>{2}));
  // Exactly 0.25 each: reaching p is enough (0.25 + 0.25 >= 0.5), and ties go to the lower ids.
  params.top_p = 0.5f;
  EXPECT_EQ(ids_drawn(params, {0.0f, 0.0f, 0.0f, 0.0f}), (std::set<int32_t>{0, 1}));
}

TEST(Sampler, TopPSortsBeyondItsFirstGuessOnALargeFlatVocabulary) {
  // 1000 tokens with slowly falling logits: top_p = 0.5 needs far more than the first 256.
  std::vector<float> logits(1000);
  for (size_t i = 0; i < logits.size(); ++i) logits[(i * 379) % 1000] = -0.001f * i;
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp(static_cast<double>(logits[i]));
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
  // The cut computed in double; one more token is allowed because the sampler sums in float.
  size_t n_allowed = 0;
  for (double cumulative = 0; cumulative < 0.5; ++n_allowed)
    cumulative += p[order[n_allowed]] / sum;
  ASSERT_GT(n_allowed, 300u);
  const std::set<int32_t> allowed(order.begin(), order.begin() + n_allowed + 1);

  SamplingParams params = stochastic();
  params.top_p = 0.5f;
  const std::set<int32_t> drawn = ids_drawn(params, logits, 3000);
  EXPECT_TRUE(std::includes(allowed.begin(), allowed.end(), drawn.begin(), drawn.end()));
  const auto beyond_256 = [&](int32_t id) {
    return std::find(order.begin(), order.end(), id) - order.begin() >= 256;
  };
  EXPECT_TRUE(std::any_of(drawn.begin(), drawn.end(), beyond_256));
}

TEST(Sampler, MinPKeepsTokensWithinAFactorOfTheMostLikely) {
  SamplingParams params = stochastic();
  params.min_p = 0.2f;  // p >= 0.1: 0.5, 0.3, 0.15
  EXPECT_EQ(ids_drawn(params, kFourTokens), (std::set<int32_t>{2, 0, 3}));
  params.min_p = 0.5f;  // p >= 0.25: 0.5, 0.3
  EXPECT_EQ(ids_drawn(params, kFourTokens), (std::set<int32_t>{2, 0}));
  params.min_p = 1.0f;
  EXPECT_EQ(ids_drawn(params, kFourTokens, 300), (std::set<int32_t>{2}));
}

TEST(Sampler, TypicalKeepsTokensNearestTheEntropy) {
  // Entropy of {0.5, 0.3, 0.15, 0.05} is 1.142 nats; |-ln p - H| is 0.449, 0.062, 0.755, 1.853,
  // so the typical order is 0.3, 0.5, 0.15, 0.05 (ids 0, 2, 3, 1).
  SamplingParams params = stochastic();
  params.typical_p = 0.2f;  // 0.3 > 0.2: the second most likely token alone
  EXPECT_EQ(ids_drawn(params, kFourTokens, 300), (std::set<int32_t>{0}));
  params.typical_p = 0.5f;  // 0.3, 0.8
  EXPECT_EQ(ids_drawn(params, kFourTokens), (std::set<int32_t>{0, 2}));
  params.typical_p = 0.9f;  // 0.3, 0.8, 0.95
  EXPECT_EQ(ids_drawn(params, kFourTokens), (std::set<int32_t>{0, 2, 3}));
  // Exactly 0.25 each: unlike top-p the mass must exceed p (0.5 is not > 0.5), ties to lower ids.
  params.typical_p = 0.5f;
  EXPECT_EQ(ids_drawn(params, {0.0f, 0.0f, 0.0f, 0.0f}), (std::set<int32_t>{0, 1, 2}));
}

TEST(Sampler, TypicalSurvivesProbabilitiesThatUnderflow) {
  std::vector<float> logits(100, -300.0f);
  logits[7] = 0.0f;
  SamplingParams params = stochastic();
  params.typical_p = 0.5f;
  EXPECT_EQ(ids_drawn(params, logits, 100), (std::set<int32_t>{7}));
}

TEST(Sampler, StagesRunInLlamaCppOrder) {
  // top-k = 2 leaves {0.5, 0.3}, renormalized {0.625, 0.375}; top-p = 0.6 then keeps only the
  // first. Top-p before top-k would keep both (0.5 < 0.6 on the full distribution).
  SamplingParams params = stochastic();
  params.top_k = 2;
  params.top_p = 0.6f;
  EXPECT_EQ(ids_drawn(params, kFourTokens, 500), (std::set<int32_t>{2}));
  // Min-p sees logits before the temperature: at T = 100 every token is nearly equally likely,
  // but min_p = 0.5 still cuts at half of the most likely token's probability at T = 1.
  params = stochastic(100.0f);
  params.min_p = 0.5f;
  EXPECT_EQ(ids_drawn(params, kFourTokens), (std::set<int32_t>{2, 0}));
}

// Draws 20,000 tokens with one sampler and compares frequencies with softmax(logits / T).
// Each frequency has a standard deviation of at most sqrt(0.25 / 20000) = 0.0035; the tolerance
// 0.015 is over four of them.
void expect_distribution(const std::vector<float>& logits, float temperature) {
  SamplingParams params = stochastic(temperature);
  params.seed = 12345;
  Sampler sampler(params, static_cast<int64_t>(logits.size()));
  std::vector<int> counts(logits.size(), 0);
  const int n_draws = 20000;
  for (int i = 0; i < n_draws; ++i)
    ++counts[static_cast<size_t>(sampler.sample(logits.data(), {}))];
  double sum = 0;
  for (float logit : logits) sum += std::exp(static_cast<double>(logit) / temperature);
  for (size_t i = 0; i < logits.size(); ++i) {
    const double expected = std::exp(static_cast<double>(logits[i]) / temperature) / sum;
    EXPECT_NEAR(static_cast<double>(counts[i]) / n_draws, expected, 0.015)
        << "token " << i << " at T=" << temperature;
  }
}

TEST(Sampler, DrawsMatchSoftmaxAtTemperatureOne) {
  expect_distribution({0.0f, 1.0f, 2.0f}, 1.0f);  // 0.090, 0.245, 0.665
  expect_distribution({2.0f, 0.0f, 1.0f}, 1.0f);
}

TEST(Sampler, TemperatureSharpensAndFlattens) {
  expect_distribution({0.0f, 1.0f, 2.0f}, 0.5f);  // 0.016, 0.117, 0.867
  expect_distribution({0.0f, 1.0f, 2.0f}, 3.0f);  // 0.219, 0.306, 0.427
}

std::vector<int32_t> sequence(Sampler& sampler, const std::vector<float>& logits, int n) {
  std::vector<int32_t> ids;
  ids.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids.push_back(sampler.sample(logits.data(), ids));
  return ids;
}

TEST(Sampler, SameSeedSameSequenceOtherSeedOtherSequence) {
  const std::vector<float> logits = {0.1f, 0.2f, 0.0f, 0.3f, 0.1f, 0.0f, 0.2f, 0.1f};
  SamplingParams params = stochastic(0.8f);
  params.top_k = 6;
  params.repeat_penalty = 1.1f;
  params.seed = 42;
  Sampler a(params, 8), b(params, 8);
  const std::vector<int32_t> first = sequence(a, logits, 64);
  EXPECT_EQ(sequence(b, logits, 64), first);
  params.seed = 43;
  Sampler c(params, 8);
  EXPECT_NE(sequence(c, logits, 64), first);
  a.reseed(42);
  EXPECT_EQ(sequence(a, logits, 64), first);
}

TEST(Sampler, SeededDrawsArePinned) {
  // Regression pin: mt19937_64 and the draw are fully specified, so these ids must never change
  // with the compiler, standard library or platform. Checked once against an independent Python
  // model of the generator and the draw.
  const std::vector<float> logits = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f};
  SamplingParams params = stochastic();
  params.seed = 0xC0FFEE;
  Sampler sampler(params, 5);
  std::vector<int32_t> ids;
  ids.reserve(16);
  for (int i = 0; i < 16; ++i) ids.push_back(sampler.sample(logits.data(), {}));
  EXPECT_EQ(ids, (std::vector<int32_t>{4, 4, 0, 1, 2, 2, 4, 2, 4, 3, 4, 2, 3, 4, 2, 4}));
}

std::string error_of(const SamplingParams& params, int64_t n_vocab = 10) {
  try {
    Sampler sampler(params, n_vocab);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Sampler, RejectsInvalidParametersNamingTheField) {
  const auto with = [](auto change) {
    SamplingParams params;
    change(params);
    return params;
  };
  EXPECT_EQ(error_of(with([](SamplingParams& p) { p.top_p = 1.5f; })),
            "sampling: top_p must be in (0, 1], got 1.5");
  EXPECT_EQ(error_of(with([](SamplingParams& p) { p.top_p = 0.0f; })),
            "sampling: top_p must be in (0, 1], got 0");
  EXPECT_EQ(error_of(with([](SamplingParams& p) { p.min_p = -0.1f; })),
            "sampling: min_p must be in [0, 1], got -0.1");
  EXPECT_EQ(error_of(with([](SamplingParams& p) { p.min_p = 2.0f; })),
            "sampling: min_p must be in [0, 1], got 2");
  EXPECT_EQ(error_of(with([](SamplingParams& p) { p.typical_p = 0.0f; })),
            "sampling: typical_p must be in (0, 1], got 0");
  EXPECT_EQ(error_of(with([](SamplingParams& p) { p.penalty_last_n = -1; })),
            "sampling: penalty_last_n must be >= 0, got -1");
  EXPECT_EQ(error_of(with([](SamplingParams& p) { p.repeat_penalty = 0.0f; })),
            "sampling: repeat_penalty must be positive and finite, got 0");
  EXPECT_EQ(error_of(with([](SamplingParams& p) {
              p.logit_bias = {{10, 1.0f}};
            })),
            "sampling: logit_bias token id 10 is outside the vocabulary (10 tokens)");
  EXPECT_EQ(error_of(with([](SamplingParams& p) {
              p.logit_bias = {{-1, 1.0f}};
            })),
            "sampling: logit_bias token id -1 is outside the vocabulary (10 tokens)");
  EXPECT_NE(error_of(with([](SamplingParams& p) { p.top_p = std::nanf(""); })), "no error");
  EXPECT_NE(error_of(with([](SamplingParams& p) { p.frequency_penalty = kInf; })), "no error");
  EXPECT_NE(error_of(with([](SamplingParams& p) { p.logit_bias = {{3, kInf}}; })), "no error");
  EXPECT_NE(error_of({}, 0), "no error");
  EXPECT_THROW(validate_sampling_params(with([](SamplingParams& p) { p.typical_p = 1.01f; }), 10),
               Error);
}

TEST(Sampler, AcceptsTheEdgesOfEveryRange) {
  SamplingParams params;
  params.temperature = -1.0f;
  params.top_p = 1.0f;
  params.min_p = 1.0f;
  params.typical_p = 1.0f;
  params.penalty_last_n = 0;
  params.top_k = -5;
  params.presence_penalty = -2.0f;
  params.logit_bias = {{0, -kInf}, {9, -100.0f}};
  EXPECT_EQ(error_of(params), "no error");
  params.temperature = std::nanf("");
  EXPECT_EQ(error_of(params), "no error");
  EXPECT_NO_THROW(validate_sampling_params(params, 10));
}

}  // namespace
}  // namespace sluice::runtime
