// CpuBackend's DeepSeek sparse attention ops against straightforward references on fresh random
// data (seed from the clock, printed on failure): layer_norm against a float64 LayerNorm,
// indexer_scores against float64 sums, top_k_positions against a full stable sort (ties to
// the lower column, -0 equal to +0) including rows that see no more than top_k columns.
// attention_selected is covered by tests/unit/model/dsa_indexer_test.cpp (SelectedAttention).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/seeded_test.h"

namespace sluice::test {
namespace {

class SparseAttentionOps : public SeededTest {
 protected:
  cpu::CpuBackend cpu_{nullptr};
};

// Float steps (mean, difference, variance, scale, products) each round once: within 1e-5
// relative of the float64 LayerNorm's magnitude |x - mean| / σ · |w| + |b|.
TEST_F(SparseAttentionOps, LayerNormMatchesFloat64) {
  const int64_t rows = 9, n = 200;
  const float eps = 1e-5f;
  const auto x = uniform(size_t(rows * n), -2.0f, 3.0f);
  const auto w = uniform(size_t(n), -2.0f, 2.0f);
  const auto b = uniform(size_t(n), -1.0f, 1.0f);
  std::vector<float> y(x.size());
  cpu_.layer_norm(x.data(), w.data(), b.data(), y.data(), rows, n, eps);
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0.0, var = 0.0;
    for (int64_t i = 0; i < n; ++i) mean += x[size_t(r * n + i)];
    mean /= double(n);
    for (int64_t i = 0; i < n; ++i) var += std::pow(x[size_t(r * n + i)] - mean, 2);
    const double sigma = std::sqrt(var / double(n) + eps);
    for (int64_t i = 0; i < n; ++i) {
      const double normed = (x[size_t(r * n + i)] - mean) / sigma;
      const double want = normed * w[size_t(i)] + b[size_t(i)];
      const double scale = std::fabs(normed * w[size_t(i)]) + std::fabs(b[size_t(i)]);
      ASSERT_NEAR(y[size_t(r * n + i)], want, 1e-5 * scale + 1e-7) << where();
    }
  }
  // In place gives the same bits.
  std::vector<float> in_place = x;
  cpu_.layer_norm(in_place.data(), w.data(), b.data(), in_place.data(), rows, n, eps);
  EXPECT_EQ(in_place, y) << where();
}

// Each score within 1e-5 of Σ_h |w_h| Σ_i |q_i k_i| (float32 dots and sums) of the float64 one;
// columns past a row's position are -inf.
TEST_F(SparseAttentionOps, IndexerScoresMatchFloat64) {
  const int64_t n_head = 4, d = 32, capacity = 16, pos0 = 5, n_tokens = 7;
  const int64_t n_keys = pos0 + n_tokens;
  std::vector<float> cells = uniform(size_t(capacity * d), -1.0f, 1.0f);
  std::vector<float> unused(1);
  const KvLayerView kv{KvElement::kF32, cells.data(), unused.data(), capacity, 1, d, 0};
  const auto q = uniform(size_t(n_tokens * n_head * d), -1.0f, 1.0f);
  const auto w = uniform(size_t(n_tokens * n_head), -0.5f, 0.5f);
  std::vector<float> scores(size_t(n_tokens * n_keys));
  cpu_.indexer_scores(q.data(), w.data(), kv, n_tokens, n_head, pos0, scores.data());
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t j = 0; j < n_keys; ++j) {
      const float got = scores[size_t(t * n_keys + j)];
      if (j > pos0 + t) {
        EXPECT_EQ(got, -std::numeric_limits<float>::infinity());
        continue;
      }
      double want = 0.0, scale = 0.0;
      for (int64_t h = 0; h < n_head; ++h) {
        double dot = 0.0, magnitude = 0.0;
        for (int64_t i = 0; i < d; ++i) {
          const double p = double(q[size_t((t * n_head + h) * d + i)]) * cells[size_t(j * d + i)];
          dot += p;
          magnitude += std::fabs(p);
        }
        want += std::max(dot, 0.0) * w[size_t(t * n_head + h)];
        scale += magnitude * std::fabs(w[size_t(t * n_head + h)]);
      }
      ASSERT_NEAR(got, want, 1e-5 * scale + 1e-12) << "row " << t << " key " << j << " " << where();
    }
  }
}

// The chosen columns equal a stable sort's first top_k (scores descending, ties to the lower
// column), ascending; rows seeing at most top_k columns list them all, then -1.
TEST_F(SparseAttentionOps, TopKPositionsMatchStableSort) {
  const int64_t n_rows = 12, pos0 = 3, top_k = 6, n_cols = pos0 + n_rows;
  std::uniform_int_distribution<int> level(0, 4);
  std::vector<float> scores(size_t(n_rows * n_cols));
  for (float& s : scores) s = float(level(rng_)) * 0.5f - 1.0f;  // many ties, zeros of both signs
  for (size_t i = 0; i < scores.size(); i += 5) scores[i] = -0.0f;
  std::vector<int32_t> got(size_t(n_rows * top_k));
  cpu_.top_k_positions(scores.data(), n_rows, n_cols, pos0, top_k, got.data());
  for (int64_t t = 0; t < n_rows; ++t) {
    const int64_t visible = pos0 + t + 1;
    std::vector<int32_t> want(size_t(top_k), -1);
    std::vector<int32_t> order(static_cast<size_t>(visible));
    std::iota(order.begin(), order.end(), 0);
    if (visible > top_k) {
      const float* row = scores.data() + t * n_cols;
      std::stable_sort(order.begin(), order.end(),
                       [&](int32_t a, int32_t b) { return row[a] > row[b]; });
      order.resize(size_t(top_k));
      std::sort(order.begin(), order.end());
    }
    std::copy(order.begin(), order.end(), want.begin());
    EXPECT_EQ(std::vector<int32_t>(got.begin() + t * top_k, got.begin() + (t + 1) * top_k), want)
        << "row " << t << " " << where();
  }
}

}  // namespace
}  // namespace sluice::test
