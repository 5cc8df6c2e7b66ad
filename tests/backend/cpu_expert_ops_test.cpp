// CpuBackend::matmul_experts — a decode token's choices in one parallel loop — against a matmul
// of each chosen matrix on its one row: bit for bit, for every weight type with a dot product
// (F32, Q8_0, Q4_K, Q6_K … among them), a shared input (gate, up) and one input per choice
// (down), repeated choices, stacks with padding between matrices, on a pool of 2 threads and
// without a pool; and gate and up as one loop (matmul_experts_shared_input). Ids outside the
// stack are refused with an error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/expert_selection.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "quant_test_data.h"

namespace sluice::test {
namespace {

constexpr int64_t kCols = 512;  // two K-quant super-blocks
constexpr int64_t kRows = 37;   // odd: chunks end inside matrices
constexpr int64_t kCount = 6;
constexpr int64_t kPadding = 64;  // bytes between matrices, as a stack's stride may have

struct Stack {
  std::vector<uint8_t> bytes;
  ExpertStack view;
};

Stack random_stack(QType type, std::mt19937& rng) {
  const int64_t matrix = int64_t(*row_bytes(type, kCols)) * kRows;
  Stack s;
  s.bytes.resize(size_t((matrix + kPadding) * kCount));
  for (int64_t e = 0; e < kCount; ++e) {
    const std::vector<uint8_t> rows = random_weight_rows(type, kRows, kCols, rng);
    std::memcpy(s.bytes.data() + e * (matrix + kPadding), rows.data(), rows.size());
  }
  s.view = {type, s.bytes.data(), matrix + kPadding, kCount, kCols, kRows};
  return s;
}

std::vector<float> random_inputs(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(size_t(n * kCols));
  for (float& v : x) v = dist(rng);
  return x;
}

void expect_matmul_numbers(cpu::CpuBackend& backend, QType type, bool shared, uint32_t seed) {
  std::mt19937 rng(seed);
  const Stack stack = random_stack(type, rng);
  const std::vector<int32_t> ids = {4, 1, 4, 0, 5};  // a repeat, unordered
  const int64_t n = int64_t(ids.size());
  const std::vector<float> x = random_inputs(shared ? 1 : n, rng);
  std::vector<float> got(size_t(n * kRows), -1.0f), want(size_t(n * kRows), -2.0f);
  backend.matmul_experts(stack.view, ids.data(), n, x.data(), shared, got.data());
  for (int64_t c = 0; c < n; ++c) {
    backend.matmul(stack.view.matrix(ids[size_t(c)]), x.data() + (shared ? 0 : c * kCols),
                   want.data() + c * kRows, 1);
  }
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
        << qtype_name(type) << (shared ? " shared" : " per choice") << " at " << i << ": " << got[i]
        << " vs " << want[i] << " (seed " << seed << ")";
  }
}

// Gate and up as one loop (matmul_experts_shared_input) — two stacks of `type`, or of `type`
// and F32, which takes the default of one matmul_experts each — against a matmul per matrix.
void expect_shared_input_numbers(cpu::CpuBackend& backend, QType type, QType second,
                                 uint32_t seed) {
  std::mt19937 rng(seed);
  const Stack gate = random_stack(type, rng), up = random_stack(second, rng);
  const std::vector<int32_t> ids = {2, 5, 0};
  const int64_t n = int64_t(ids.size());
  const std::vector<float> x = random_inputs(1, rng);
  std::vector<float> got_gate(size_t(n * kRows)), got_up(size_t(n * kRows)),
      want(static_cast<size_t>(kRows));
  const ExpertStack stacks[] = {gate.view, up.view};
  float* const ys[] = {got_gate.data(), got_up.data()};
  backend.matmul_experts_shared_input(stacks, ys, 2, ids.data(), n, x.data());
  for (int s = 0; s < 2; ++s) {
    for (int64_t c = 0; c < n; ++c) {
      backend.matmul(stacks[s].matrix(ids[size_t(c)]), x.data(), want.data(), 1);
      ASSERT_EQ(std::memcmp(ys[s] + c * kRows, want.data(), sizeof(float) * kRows), 0)
          << qtype_name(type) << " + " << qtype_name(second) << ": stack " << s << " choice " << c
          << " (seed " << seed << ")";
    }
  }
}

TEST(CpuExpertOps, MatmulExpertsGivesEachMatrixsMatmul) {
  const uint32_t seed = std::random_device{}();
  ThreadPool pool(2);
  cpu::CpuBackend pooled(&pool), single(nullptr);
  const std::vector<QType> types = dot_weight_types();
  for (QType must : {QType::F32, QType::Q8_0, QType::Q4_K, QType::Q6_K}) {
    ASSERT_NE(std::find(types.begin(), types.end(), must), types.end()) << qtype_name(must);
  }
  for (QType type : types) {
    for (bool shared : {true, false}) {
      expect_matmul_numbers(pooled, type, shared, seed);
      expect_matmul_numbers(single, type, shared, seed);
    }
    expect_shared_input_numbers(pooled, type, type, seed);
    expect_shared_input_numbers(single, type, type, seed);
    expect_shared_input_numbers(pooled, type, QType::F32, seed);
  }
}

TEST(CpuExpertOps, MatmulExpertsRefusesIdsOutsideTheStack) {
  std::mt19937 rng(7);
  cpu::CpuBackend backend(nullptr);
  const Stack stack = random_stack(QType::Q8_0, rng);
  const std::vector<float> x = random_inputs(1, rng);
  std::vector<float> y(size_t(2 * kRows));
  for (int32_t bad : {-1, int32_t(kCount)}) {
    const int32_t ids[] = {0, bad};
    EXPECT_THROW(backend.matmul_experts(stack.view, ids, 2, x.data(), true, y.data()), Error)
        << bad;
  }
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

// select_experts with ExpertScoring::kSoftmax is softmax_rows then select_experts on the
// probabilities, bit for bit (choices and weights), with and without a selection bias; the host
// reference alone refuses the scoring (the softmax is the backend's).
TEST(CpuExpertOps, SoftmaxScoringIsSoftmaxRowsThenSelection) {
  std::mt19937 rng(20261130);
  std::uniform_real_distribution<float> logit(-4.0f, 4.0f), small(-0.05f, 0.05f);
  cpu::CpuBackend backend(nullptr);
  for (const int64_t n_expert : {8, 60, 128}) {
    const int64_t n_tokens = 5, k = 4;
    std::vector<float> logits(static_cast<size_t>(n_tokens * n_expert));
    std::vector<float> bias(static_cast<size_t>(n_expert));
    for (float& v : logits) v = logit(rng);
    for (float& b : bias) b = small(rng);
    for (const bool with_bias : {false, true}) {
      SCOPED_TRACE(std::to_string(n_expert) + " experts, bias " + std::to_string(with_bias));
      ExpertSelection s{n_expert, k, 0, 0, true, 0.0f, ExpertScoring::kSoftmax};
      std::vector<int32_t> fused_ids(size_t(n_tokens * k)), plain_ids(fused_ids.size());
      std::vector<float> fused_w(fused_ids.size()), plain_w(fused_ids.size());
      std::vector<float> probs = logits;
      backend.select_experts(logits.data(), with_bias ? bias.data() : nullptr, n_tokens, s,
                             fused_ids.data(), fused_w.data());
      backend.softmax_rows(probs.data(), n_tokens, n_expert);
      s.scoring = ExpertScoring::kProbabilities;
      backend.select_experts(probs.data(), with_bias ? bias.data() : nullptr, n_tokens, s,
                             plain_ids.data(), plain_w.data());
      EXPECT_EQ(fused_ids, plain_ids);
      for (size_t i = 0; i < fused_w.size(); ++i) {
        uint32_t a, b;
        std::memcpy(&a, &fused_w[i], 4);
        std::memcpy(&b, &plain_w[i], 4);
        EXPECT_EQ(a, b) << "weight " << i;
      }
      std::vector<float> row(logits.begin(), logits.begin() + n_expert);
      SelectionScratch scratch;
      s.scoring = ExpertScoring::kSoftmax;
      EXPECT_THROW(select_and_weigh_experts(row.data(), nullptr, s, scratch, fused_ids.data(),
                                            fused_w.data()),
                   Error);
    }
  }
}

}  // namespace
}  // namespace sluice::test
