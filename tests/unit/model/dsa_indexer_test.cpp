// DeepSeek sparse attention's two halves on random data, against straightforward double-precision
// references: the indexer's key choice (dsa_select_keys: ReLU-weighted scores, causal visibility,
// top_k, "everything" while a query sees at most top_k keys) and the attention restricted to the
// chosen keys (attend_selected), whose dense rows must be the backend's dense attention bit for
// bit. The tiny glm-dsa files of tests/e2e/test_llamacpp_tiny.py cover the whole layer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/half.h"
#include "model/blocks/dsa_indexer.h"
#include "model/blocks/selected_attention.h"
#include "model/kv_cache.h"

namespace sluice::model {
namespace {

std::vector<float> random_floats(std::mt19937& rng, size_t n, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

float cached_key(const KvLayerView& kv, int64_t pos, int64_t i) {
  const int64_t at = (pos % kv.capacity) * kv.n_head_kv * kv.head_dim_k + i;
  return kv.type == KvElement::kF16 ? fp16_to_fp32(static_cast<const uint16_t*>(kv.k)[at])
                                    : static_cast<const float*>(kv.k)[at];
}

float cached_value(const KvLayerView& kv, int64_t pos, int64_t i) {
  const int64_t at = (pos % kv.capacity) * kv.n_head_kv * kv.head_dim_v + i;
  return kv.type == KvElement::kF16 ? fp16_to_fp32(static_cast<const uint16_t*>(kv.v)[at])
                                    : static_cast<const float*>(kv.v)[at];
}

class DsaSelection : public ::testing::TestWithParam<KvElement> {};

// A 20-token prefill then 3 decode steps, top_k 6: rows at positions 0..5 choose everything,
// the others the 6 best-scoring positions among those they see.
TEST_P(DsaSelection, MatchesReferenceTopK) {
  std::mt19937 rng(7);
  DsaIndexerShape s;
  s.n_head = 8;
  s.head_dim = 64;
  s.top_k = 6;
  const int64_t n_ctx = 64, n_batch = 20;
  cpu::CpuBackend backend(nullptr);
  KvCache cache({s.kv_spec()}, n_ctx, n_batch, GetParam(), backend);
  const KvLayerView kv = cache.layer(0);
  const std::vector<float> all_keys = random_floats(rng, size_t(n_ctx * s.head_dim));
  for (int64_t p = 0; p < n_ctx; ++p) {
    for (int64_t i = 0; i < s.head_dim; ++i) {
      const float value = all_keys[size_t(p * s.head_dim + i)];
      if (kv.type == KvElement::kF16) {
        static_cast<uint16_t*>(kv.k)[p * s.head_dim + i] = fp32_to_fp16(value);
      } else {
        static_cast<float*>(kv.k)[p * s.head_dim + i] = value;
      }
    }
  }
  DsaIndexerScratch scratch;
  scratch.reserve(backend, s, n_batch);
  KeySelection keys;
  keys.reserve(backend, n_batch + 1, s.top_k);  // + 1: the runs below start at row 1

  int64_t compared = 0;
  for (const auto& [pos0, n_tokens] : {std::pair<int64_t, int64_t>{0, 20}, {20, 1}, {21, 2}}) {
    const std::vector<float> q = random_floats(rng, size_t(n_tokens * s.n_head * s.head_dim));
    const std::vector<float> w = random_floats(rng, size_t(n_tokens * s.n_head), 0.1f);
    const int64_t row0 = 1;  // the run need not start the chunk
    dsa_select_keys(backend, s, kv, q.data(), w.data(), pos0, n_tokens, row0, scratch, keys);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const int64_t visible = pos0 + t + 1;
      const bool everything = keys.everything[size_t(row0 + t)] != 0;
      ASSERT_EQ(everything, visible <= s.top_k) << "position " << pos0 + t;
      if (everything) continue;
      std::vector<double> score(static_cast<size_t>(visible));
      for (int64_t j = 0; j < visible; ++j) {
        for (int64_t h = 0; h < s.n_head; ++h) {
          double dot = 0.0;
          for (int64_t i = 0; i < s.head_dim; ++i) {
            dot += double(q[size_t((t * s.n_head + h) * s.head_dim + i)]) * cached_key(kv, j, i);
          }
          score[size_t(j)] += std::max(dot, 0.0) * w[size_t(t * s.n_head + h)];
        }
      }
      std::vector<int32_t> order(static_cast<size_t>(visible));
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(),
                [&](int32_t a, int32_t b) { return score[size_t(a)] > score[size_t(b)]; });
      // A near-tie at the cut could fall either way in float32: none with this seed.
      ASSERT_GT(score[size_t(order[size_t(s.top_k - 1)])] - score[size_t(order[size_t(s.top_k)])],
                1e-4);
      std::vector<int32_t> expected(order.begin(), order.begin() + s.top_k);
      std::sort(expected.begin(), expected.end());
      const int32_t* got = keys.positions.data() + (row0 + t) * s.top_k;
      EXPECT_EQ(std::vector<int32_t>(got, got + s.top_k), expected) << "position " << pos0 + t;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 14 + 1 + 2);
}

class SelectedAttention : public ::testing::TestWithParam<KvElement> {};

// MLA-like multi-query attention (4 query heads over one cached head) of a 12-token chunk after 4
// cached positions, top_k 5: rows at positions 4 take the dense path, the rest random choices.
TEST_P(SelectedAttention, MatchesMaskedSoftmaxReference) {
  std::mt19937 rng(11);
  const int64_t n_head = 4, dk = 24, dv = 16, top_k = 5, pos0 = 4, n_tokens = 12;
  const int64_t n_ctx = 32;
  cpu::CpuBackend backend(nullptr);
  KvCache cache({{1, dk, dv, 0}}, n_ctx, n_tokens, GetParam(), backend);
  const KvLayerView kv = cache.layer(0);
  const int64_t n_pos = pos0 + n_tokens;
  const std::vector<float> k = random_floats(rng, size_t(n_pos * dk));
  const std::vector<float> v = random_floats(rng, size_t(n_pos * dv));
  backend.kv_store(kv, k.data(), v.data(), n_pos, 0);
  const std::vector<float> q = random_floats(rng, size_t(n_tokens * n_head * dk));

  KeySelection keys;
  keys.reserve(backend, n_tokens, top_k);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t visible = pos0 + t + 1;
    keys.everything[size_t(t)] = visible <= top_k;
    std::vector<int32_t> all(static_cast<size_t>(visible));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    if (visible > top_k) {
      std::sort(all.begin(), all.begin() + top_k);
      std::copy_n(all.begin(), top_k, keys.positions.data() + t * top_k);
    }
  }
  AttentionCall call;
  call.q = q.data();
  std::vector<float> out(size_t(n_tokens * n_head * dv));
  call.out = out.data();
  call.n_tokens = n_tokens;
  call.n_head = n_head;
  call.pos0 = pos0;
  call.scale = 1.0f / std::sqrt(float(dk));
  call.kv = kv;
  attend_selected(backend, call, keys, 0);

  // The dense row is exactly the backend's ordinary attention.
  std::vector<float> dense(out.size());
  AttentionCall plain = call;
  plain.out = dense.data();
  backend.attention(plain);
  for (int64_t i = 0; i < n_head * dv; ++i) EXPECT_EQ(out[size_t(i)], dense[size_t(i)]);

  // Every row against a double softmax over its chosen positions (F16: q is rounded to half).
  const double bound = kv.type == KvElement::kF16 ? 5e-3 : 1e-5;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t visible = pos0 + t + 1;
    std::vector<int32_t> chosen(static_cast<size_t>(visible));
    std::iota(chosen.begin(), chosen.end(), 0);
    if (!keys.everything[size_t(t)]) {
      chosen.assign(keys.positions.data() + t * top_k, keys.positions.data() + (t + 1) * top_k);
    }
    for (int64_t h = 0; h < n_head; ++h) {
      std::vector<double> logit;
      for (int32_t p : chosen) {
        double dot = 0.0;
        for (int64_t i = 0; i < dk; ++i) {
          dot += double(q[size_t((t * n_head + h) * dk + i)]) * cached_key(kv, p, i);
        }
        logit.push_back(dot * call.scale);
      }
      const double top = *std::max_element(logit.begin(), logit.end());
      double sum = 0.0;
      for (double& l : logit) sum += (l = std::exp(l - top));
      for (int64_t i = 0; i < dv; ++i) {
        double expected = 0.0;
        for (size_t j = 0; j < chosen.size(); ++j) {
          expected += logit[j] / sum * cached_value(kv, chosen[j], i);
        }
        EXPECT_NEAR(out[size_t((t * n_head + h) * dv + i)], expected, bound)
            << "row " << t << " head " << h << " dim " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kv, DsaSelection, ::testing::Values(KvElement::kF32, KvElement::kF16));
INSTANTIATE_TEST_SUITE_P(Kv, SelectedAttention,
                         ::testing::Values(KvElement::kF32, KvElement::kF16));

}  // namespace
}  // namespace sluice::model
