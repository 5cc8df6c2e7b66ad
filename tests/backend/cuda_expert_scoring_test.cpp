// The routed experts' device steps that gpt-oss and DeepSeek V3 need beyond a softmax router
// (backend/cuda/expert_matmul.h): select_experts on logits — the sigmoid scoring (with a
// selection bias, groups, normalised and scaled weights) and the softmax of the chosen logits
// (gpt-oss) — against the host's select_and_weigh_experts (backend/expert_selection.h), and
// CudaBackend::add_expert_bias and scale_expert_rows against CpuBackend's, bit for bit (one float
// addition or multiplication each).
// Tolerance of the selection: the chosen ids exactly (the scores are drawn at least 64 ulps
// apart, so a last-bit difference cannot reorder them); the weights within 8 float ulps
// (relative 8 * FLT_EPSILON): the host's exp is libm's expf, the device's exp in double rounded
// to float, which can differ in the last bit, and that bit then passes through at most four
// roundings (1 + e, the division, the sum and the normalisation or scale). Without an exp (the
// probabilities scoring) cuda_expert_matmul_test holds them bit-equal. Fresh random data every
// run (the seed is in every failure message), outputs poisoned with NaN before each launch.
// Skips visibly without the CUDA backend or without a device.
#include <gtest/gtest.h>

#ifdef SLUICE_HAVE_CUDA

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/softmax.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/expert_matmul.h"
#include "backend/cuda_select_on_device.h"
#include "backend/cuda_test_fixture.h"
#include "backend/expert_selection.h"
#include "sluice/error.h"

namespace sluice::test {
namespace {

// Whether values are pairwise at least 64 ulps apart (sorts them).
bool spread(std::vector<float> values) {
  std::sort(values.begin(), values.end());
  for (size_t i = 1; i < values.size(); ++i) {
    const float gap = 64.0f * FLT_EPSILON * std::max(std::fabs(values[i]), 1e-3f);
    if (values[i] - values[i - 1] < gap) return false;
  }
  return true;
}

// Whether the scores (row + bias, after the scoring) and the groups' scores (their two best
// summed) are well separated.
bool well_separated(const float* row, const std::vector<float>& bias, const ExpertSelection& s) {
  std::vector<float> scores(size_t(s.n_expert));
  std::vector<float> softmax(row, row + s.n_expert);
  cpu::softmax_row(softmax.data(), s.n_expert);
  for (int64_t e = 0; e < s.n_expert; ++e) {
    const float p = s.scoring == ExpertScoring::kSigmoid   ? sigmoid_probability(row[e])
                    : s.scoring == ExpertScoring::kSoftmax ? softmax[size_t(e)]
                                                           : row[e];
    scores[size_t(e)] = p + (bias.empty() ? 0.0f : bias[size_t(e)]);
  }
  std::vector<float> group_scores;
  for (int64_t g = 0; s.n_group > 1 && g < s.n_group; ++g) {
    const int64_t per_group = s.n_expert / s.n_group;
    std::vector<float> group(scores.begin() + g * per_group, scores.begin() + (g + 1) * per_group);
    std::sort(group.rbegin(), group.rend());
    group_scores.push_back(group[0] + group[1]);
  }
  return spread(scores) && spread(group_scores);
}

// [n_tokens, n_expert] router logits in [-4, 4] (no saturated sigmoid), each row redrawn until
// its scores are well separated.
std::vector<float> random_logits(int64_t n_tokens, const ExpertSelection& s,
                                 const std::vector<float>& bias, std::mt19937& rng) {
  std::uniform_real_distribution<float> logit(-4.0f, 4.0f);
  std::vector<float> logits(size_t(n_tokens * s.n_expert));
  for (int64_t t = 0; t < n_tokens; ++t) {
    float* row = logits.data() + t * s.n_expert;
    do {
      for (int64_t e = 0; e < s.n_expert; ++e) row[e] = logit(rng);
    } while (!well_separated(row, bias, s));
  }
  return logits;
}

struct ScoringCase {
  const char* name;
  ExpertSelection config;
  bool with_bias;
};

void expect_scoring_matches_host(const ScoringCase& test, uint32_t seed) {
  SCOPED_TRACE(std::string(test.name) + ", seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const ExpertSelection& s = test.config;
  const int64_t n_tokens = 9, k = s.n_expert_used;
  std::vector<float> bias;  // [n_expert] or empty
  if (test.with_bias) {
    std::uniform_real_distribution<float> value(-0.05f, 0.05f);
    bias.resize(size_t(s.n_expert));
    for (float& b : bias) b = value(rng);
  }
  const std::vector<float> logits = random_logits(n_tokens, s, bias, rng);
  std::vector<int32_t> host_selected(size_t(n_tokens * k));  // [n_tokens, k]
  std::vector<float> host_weights(host_selected.size());     // [n_tokens, k]
  SelectionScratch scratch;
  // kSoftmax: the CPU backend's softmax_rows first, then the probabilities' selection.
  ExpertSelection host = s;
  if (s.scoring == ExpertScoring::kSoftmax) host.scoring = ExpertScoring::kProbabilities;
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::vector<float> row(logits.begin() + t * s.n_expert, logits.begin() + (t + 1) * s.n_expert);
    if (s.scoring == ExpertScoring::kSoftmax) cpu::softmax_row(row.data(), s.n_expert);
    select_and_weigh_experts(row.data(), bias.empty() ? nullptr : bias.data(), host, scratch,
                             host_selected.data() + t * k, host_weights.data() + t * k);
  }
  DeviceChoices device;
  ASSERT_NO_FATAL_FAILURE(select_on_device(logits, bias, n_tokens, s, device));
  const std::vector<int32_t>& selected = device.selected;
  const std::vector<float>& weights = device.weights;
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t c = 0; c < k; ++c) {
      const size_t i = size_t(t * k + c);
      ASSERT_EQ(selected[i], host_selected[i]) << "token " << t << " choice " << c;
      ASSERT_TRUE(std::isfinite(weights[i])) << "token " << t << " choice " << c;
      EXPECT_LE(std::fabs(weights[i] - host_weights[i]),
                8.0f * FLT_EPSILON * std::fabs(host_weights[i]))
          << "token " << t << " choice " << c << ": " << weights[i] << " vs " << host_weights[i];
    }
  }
}

TEST(CudaSelectExpertsScoring, MatchesHostSelection) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device present";
  const uint32_t seed = clock_seed();
  ExpertSelection deepseek{256, 8, 8, 4, true, 2.5f, ExpertScoring::kSigmoid};
  expect_scoring_matches_host({"deepseek3 sigmoid", deepseek, true}, seed);
  ExpertSelection glm{160, 8, 1, 1, true, 1.8f, ExpertScoring::kSigmoid};  // no groups
  expect_scoring_matches_host({"glm4moe sigmoid", glm, true}, seed + 1);
  ExpertSelection sigmoid_plain{64, 6, 0, 0, false, 0.0f, ExpertScoring::kSigmoid};
  expect_scoring_matches_host({"sigmoid raw weights", sigmoid_plain, false}, seed + 2);
  ExpertSelection gpt_oss{32, 4, 0, 0, false, 0.0f, ExpertScoring::kSoftmaxChosen};
  expect_scoring_matches_host({"gpt-oss-20b", gpt_oss, false}, seed + 3);
  ExpertSelection gpt_oss_120b{128, 4, 0, 0, false, 0.0f, ExpertScoring::kSoftmaxChosen};
  expect_scoring_matches_host({"gpt-oss-120b", gpt_oss_120b, false}, seed + 4);
  // The softmax of the chosen, then a bias, normalisation and a scale: every step in one.
  ExpertSelection all{96, 12, 0, 0, true, 0.5f, ExpertScoring::kSoftmaxChosen};
  expect_scoring_matches_host({"softmax chosen, normalised, scaled", all, true}, seed + 5);
  // The router's softmax inside the selection (Qwen3 MoE, OLMoE): softmax_rows' numbers.
  ExpertSelection qwen3{128, 8, 0, 0, true, 0.0f, ExpertScoring::kSoftmax};
  expect_scoring_matches_host({"qwen3moe softmax", qwen3, false}, seed + 6);
  ExpertSelection olmoe{64, 8, 0, 0, false, 0.0f, ExpertScoring::kSoftmax};
  expect_scoring_matches_host({"olmoe softmax", olmoe, false}, seed + 7);
  ExpertSelection tail{60, 4, 0, 0, true, 0.0f, ExpertScoring::kSoftmax};  // 7 groups + a tail of 4
  expect_scoring_matches_host({"softmax with a tail", tail, true}, seed + 8);
}

TEST(CudaSelectExpertsScoring, RefusesAnUnknownScoring) {
  alignas(256) static float dummy[64];
  ExpertSelection s{32, 4, 0, 0, false, 0.0f, static_cast<ExpertScoring>(7)};
  std::string error;
  EXPECT_FALSE(cuda::select_experts(dummy, nullptr, 1, s, reinterpret_cast<int32_t*>(dummy), dummy,
                                    nullptr, &error));
  EXPECT_NE(error.find("scoring"), std::string::npos) << error;
}

class CudaExpertBiasTest : public CudaDeviceTest {
 protected:
  // CudaBackend::add_expert_bias (or scale_expert_rows) on n rows of n_cols against CpuBackend's,
  // bit for bit; the table is host memory (a weight: mirrored), x and ids backend memory.
  void expect_matches_cpu(int64_t n_expert, int64_t n, int64_t n_cols, bool scale = false) {
    SCOPED_TRACE("seed " + std::to_string(seed_) + ", " + std::to_string(n) + " rows of " +
                 std::to_string(n_cols) + (scale ? ", scales" : ", biases"));
    // [n_expert, n_cols] biases or [n_expert] scales, alive till the fixture ends: a host weight
    // must not change while the backend lives (its mirror keeps the first copy of an address).
    const std::vector<float>& table =
        tables_.emplace_back(uniform(size_t(scale ? n_expert : n_expert * n_cols), -2.0f, 2.0f));
    const std::vector<float> x = uniform(size_t(n * n_cols), -2.0f, 2.0f);  // [n, n_cols]
    std::vector<int32_t> ids(static_cast<size_t>(n));                       // [n]
    std::uniform_int_distribution<int32_t> expert(0, int32_t(n_expert - 1));
    for (int32_t& id : ids) id = expert(rng_);

    std::vector<float> want = x;
    if (scale) {
      cpu_.scale_expert_rows(want.data(), table.data(), n_expert, ids.data(), n, n_cols);
    } else {
      cpu_.add_expert_bias(want.data(), table.data(), n_expert, ids.data(), n, n_cols);
    }

    const size_t x_bytes = x.size() * sizeof(float), id_bytes = ids.size() * sizeof(int32_t);
    auto* x_dev = static_cast<float*>(gpu_->allocate(x_bytes));
    auto* ids_dev = static_cast<int32_t*>(gpu_->allocate(id_bytes));
    std::vector<float> poison(x.size(), std::nanf(""));
    gpu_->upload(x_dev, poison.data(), x_bytes);  // NaN first: a skipped row would show
    gpu_->upload(x_dev, x.data(), x_bytes);
    gpu_->upload(ids_dev, ids.data(), id_bytes);
    if (scale) {
      gpu_->scale_expert_rows(x_dev, table.data(), n_expert, ids_dev, n, n_cols);
    } else {
      gpu_->add_expert_bias(x_dev, table.data(), n_expert, ids_dev, n, n_cols);
    }
    std::vector<float> got(x.size(), std::nanf(""));
    gpu_->download(got.data(), x_dev, x_bytes);
    gpu_->deallocate(x_dev);
    gpu_->deallocate(ids_dev);
    ASSERT_EQ(std::memcmp(got.data(), want.data(), x_bytes), 0);
    EXPECT_NE(std::memcmp(got.data(), x.data(), x_bytes), 0);  // the bias or scale applied
  }

  std::deque<std::vector<float>> tables_;
};

TEST_F(CudaExpertBiasTest, MatchesTheCpuBitForBit) {
  expect_matches_cpu(32, 4, 2880);     // gpt-oss-20b's decode: k = 4 rows of n_embd
  expect_matches_cpu(32, 2048, 2880);  // a 512-token chunk's rows
  expect_matches_cpu(8, 3, 20000);     // more columns than one grid row covers
  expect_matches_cpu(4, 70000, 3);     // more rows than one grid covers
}

TEST_F(CudaExpertBiasTest, ScalesMatchTheCpuBitForBit) {
  expect_matches_cpu(128, 8, 2816, true);     // a decode step: 8 rows
  expect_matches_cpu(128, 4096, 2816, true);  // a 512-token chunk's rows
  expect_matches_cpu(8, 3, 20000, true);
  expect_matches_cpu(4, 70000, 3, true);
}

}  // namespace
}  // namespace sluice::test

#else

TEST(CudaSelectExpertsScoring, MatchesHostSelection) {
  GTEST_SKIP() << "CUDA backend not built (no nvcc at configure time)";
}

#endif
