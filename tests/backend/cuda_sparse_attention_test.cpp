// CudaBackend's ops for multi-head latent attention and DeepSeek sparse attention (deepseek2,
// glm-dsa) against CpuBackend's: layer_norm, indexer_scores, top_k_positions,
// attention_selected, attention over MLA's latent cache rows (one KV head of 576 / 512, DeepSeek
// V3's sizes) and matmul_experts over more rows than one launch takes (MLA's per-head products,
// n_tokens × n_head rows). Fresh random data each run (the seed, from the clock, is in every
// failure message), device outputs poisoned with NaN bytes (0xff) before each launch.
// Tolerances, each with its reason, at the comparison. Skips visibly without a device.
#include <gtest/gtest.h>

#ifdef SLUICE_HAVE_CUDA

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda_test_fixture.h"
#include "backend/quant_test_data.h"
#include "core/half.h"
#include "quant/qtype.h"

namespace sluice::test {
namespace {

using cuda::DeviceBuffer;

class CudaSparseAttentionTest : public CudaDeviceTest {
 protected:
  // A KV layer of `capacity` cells of one head, written at positions 0 .. n_cells - 1 by both
  // backends' kv_store (the cells compared byte for byte).
  struct Cache {
    std::vector<uint8_t> cpu_k, cpu_v;
    DeviceBuffer gpu_k, gpu_v;
    KvLayerView cpu_view, gpu_view;
  };
  Cache make_cache(KvElement type, int64_t dk, int64_t dv, int64_t capacity, int64_t n_cells) {
    Cache c;
    const size_t element = type == KvElement::kF16 ? 2 : 4;
    c.cpu_k.assign(size_t(capacity * dk) * element, 0xff);
    c.cpu_v.assign(size_t(capacity * dv) * element, 0xff);
    c.gpu_k = poisoned(c.cpu_k.size());
    c.gpu_v = poisoned(c.cpu_v.size());
    c.cpu_view = {type, c.cpu_k.data(), c.cpu_v.data(), capacity, 1, dk, dv};
    c.gpu_view = c.cpu_view;
    c.gpu_view.k = c.gpu_k.data();
    c.gpu_view.v = c.gpu_v.data();
    const auto k = uniform(size_t(n_cells * dk), -1.0f, 1.0f);
    const auto v = uniform(size_t(std::max<int64_t>(1, n_cells * dv)), -1.0f, 1.0f);
    cpu_.kv_store(c.cpu_view, k.data(), v.data(), n_cells, 0);
    auto gk = upload(k);
    auto gv = upload(v);
    gpu_->kv_store(c.gpu_view, gk.as<float>(), gv.as<float>(), n_cells, 0);
    EXPECT_EQ(download<uint8_t>(c.gpu_k, c.cpu_k.size()), c.cpu_k) << "kv_store cells differ";
    return c;
  }
  static double cell(const std::vector<uint8_t>& cells, KvElement type, int64_t i) {
    if (type == KvElement::kF32) {
      float f;
      std::memcpy(&f, cells.data() + size_t(i) * 4, 4);
      return double(f);
    }
    uint16_t h;
    std::memcpy(&h, cells.data() + size_t(i) * 2, 2);
    return double(fp16_to_fp32(h));
  }

  // Each output element of attention (or attention_selected) of GPU vs CPU, relative to
  // a = Σ_p softmax_p |v_p,d| over the cells `cells_of(t)` lists (the output's own scale: a
  // convex combination loses no more than that). tolerance: in units of a.
  template <class CellsOf>
  void expect_attention_close(const Cache& c, const std::vector<float>& q, int64_t n_tokens,
                              int64_t n_head, float scale, const std::vector<float>& gpu_out,
                              const std::vector<float>& cpu_out, CellsOf cells_of, double tolerance,
                              const std::string& what) {
    const int64_t dk = c.cpu_view.head_dim_k, dv = c.cpu_view.head_dim_v;
    const KvElement type = c.cpu_view.type;
    double worst = 0.0;
    for (int64_t t = 0; t < n_tokens; ++t) {
      const std::vector<int64_t> cells = cells_of(t);
      for (int64_t h = 0; h < n_head; ++h) {
        std::vector<double> s;
        double top = -1e300;
        for (int64_t p : cells) {
          double dot = 0.0;
          for (int64_t d = 0; d < dk; ++d) {
            dot += double(q[size_t((t * n_head + h) * dk + d)]) * cell(c.cpu_k, type, p * dk + d);
          }
          s.push_back(dot * double(scale));
          top = std::max(top, s.back());
        }
        double sum = 0.0;
        for (double& x : s) sum += (x = std::exp(x - top));
        for (int64_t d = 0; d < dv; ++d) {
          double a = 1e-30;
          for (size_t i = 0; i < cells.size(); ++i) {
            a += s[i] / sum * std::fabs(cell(c.cpu_v, type, cells[i] * dv + d));
          }
          const size_t at = size_t((t * n_head + h) * dv + d);
          ASSERT_FALSE(std::isnan(gpu_out[at]))
              << what << ": NaN at " << at << " (" << where() << ")";
          const double error = std::fabs(double(gpu_out[at]) - double(cpu_out[at])) / a;
          worst = std::max(worst, error);
          ASSERT_LE(error, tolerance)
              << what << ": token " << t << " head " << h << " dim " << d << " gpu " << gpu_out[at]
              << " cpu " << cpu_out[at] << " (" << where() << ")";
        }
      }
    }
    std::printf("  %-40s worst |gpu-cpu|/a %.2e\n", what.c_str(), worst);
  }
};

// ggml's LayerNorm. The only difference is the order of the two double sums (a block reduction
// on the GPU, left to right on the CPU), far below float precision: the float mean and variance
// agree or differ by one ulp, so each output within 4 ulp of its magnitude (1e-6 relative,
// plus 1e-6 absolute for outputs near a cancelling bias).
TEST_F(CudaSparseAttentionTest, LayerNormMatchesCpu) {
  for (const int64_t n : {64, 128, 577}) {
    for (const bool affine : {false, true}) {
      const int64_t rows = 37;
      const auto x = uniform(size_t(rows * n), -3.0f, 5.0f);
      const auto weight = uniform(size_t(n), -2.0f, 2.0f);
      const auto bias = uniform(size_t(n), -1.0f, 1.0f);
      std::vector<float> expected(x.size());
      cpu_.layer_norm(x.data(), affine ? weight.data() : nullptr, affine ? bias.data() : nullptr,
                      expected.data(), rows, n, 1e-5f);
      auto gx = upload(x);
      auto gy = poisoned(x.size() * sizeof(float));
      gpu_->layer_norm(gx.as<float>(), affine ? weight.data() : nullptr,
                       affine ? bias.data() : nullptr, gy.as<float>(), rows, n, 1e-5f);
      const auto got = download<float>(gy, x.size());
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], expected[i], 1e-6 * std::fabs(expected[i]) + 1e-6)
            << "n " << n << " element " << i << " (" << where() << ")";
      }
    }
  }
}

// The indexer's scores. Each q · k adds its d products in another order on the GPU (fmaf along
// the dimension) than the CPU's SIMD dot: each dot is within d · 2^-23 · Σ|q_i k_i| of the exact
// one on either side, the ReLU does not widen that, and the heads' weighted sum (in the same
// order on both) adds n_head roundings of at most 2^-24 of the running sum: bound
// 2 d 2^-23 Σ_h |w_h| Σ_i |q_hi k_i| + n_head 2^-23 Σ_h |w_h ReLU(dot_h)|. Masked scores are -inf
// on both.
TEST_F(CudaSparseAttentionTest, IndexerScoresMatchCpu) {
  struct Case {
    KvElement type;
    int64_t n_head, d, capacity, pos0, n_tokens;
  };
  for (const Case& c :
       {Case{KvElement::kF16, 8, 64, 64, 0, 40}, Case{KvElement::kF32, 4, 128, 512, 300, 3},
        Case{KvElement::kF16, 32, 128, 1024, 700, 1}}) {
    Cache cache = make_cache(c.type, c.d, 0, c.capacity, c.pos0 + c.n_tokens);
    const auto q = uniform(size_t(c.n_tokens * c.n_head * c.d), -1.0f, 1.0f);
    const auto w = uniform(size_t(c.n_tokens * c.n_head), -0.5f, 0.5f);
    const int64_t n_keys = c.pos0 + c.n_tokens;
    std::vector<float> expected(size_t(c.n_tokens * n_keys));
    cpu_.indexer_scores(q.data(), w.data(), cache.cpu_view, c.n_tokens, c.n_head, c.pos0,
                        expected.data());
    auto gq = upload(q);
    auto gw = upload(w);
    auto gs = poisoned(expected.size() * sizeof(float));
    gpu_->indexer_scores(gq.as<float>(), gw.as<float>(), cache.gpu_view, c.n_tokens, c.n_head,
                         c.pos0, gs.as<float>());
    const auto got = download<float>(gs, expected.size());
    for (int64_t t = 0; t < c.n_tokens; ++t) {
      for (int64_t j = 0; j < n_keys; ++j) {
        const size_t at = size_t(t * n_keys + j);
        if (j > c.pos0 + t) {
          ASSERT_TRUE(std::isinf(got[at]) && got[at] < 0) << "masked score " << at;
          continue;
        }
        double bound = 0.0, terms = 0.0;
        for (int64_t h = 0; h < c.n_head; ++h) {
          double magnitude = 0.0, dot = 0.0;
          for (int64_t i = 0; i < c.d; ++i) {
            const double p = double(q[size_t((t * c.n_head + h) * c.d + i)]) *
                             cell(cache.cpu_k, c.type, j * c.d + i);
            magnitude += std::fabs(p);
            dot += p;
          }
          const double wh = std::fabs(double(w[size_t(t * c.n_head + h)]));
          bound += 2.0 * double(c.d) * 0x1p-23 * wh * magnitude;
          terms += wh * std::max(dot, 0.0);
        }
        bound += double(c.n_head) * 0x1p-23 * terms + 1e-30;
        ASSERT_LE(std::fabs(double(got[at]) - double(expected[at])), bound)
            << "row " << t << " key " << j << " gpu " << got[at] << " cpu " << expected[at] << " ("
            << where() << ")";
      }
    }
  }
}

// The top-k choice on the same scores: exactly the CPU's positions, ties included (scores drawn
// from a few values so that many tie, -0 next to +0), for rows that see fewer keys than top_k
// (every visible one, then -1) and more.
TEST_F(CudaSparseAttentionTest, TopKPositionsMatchCpuExactly) {
  struct Case {
    int64_t n_rows, pos0, top_k, levels;  // levels 0: continuous scores
  };
  for (const Case& c : {Case{40, 0, 6, 0}, Case{40, 0, 6, 3}, Case{5, 3000, 2048, 0},
                        Case{3, 5000, 2048, 50}, Case{1, 100000, 2048, 0}, Case{64, 9, 16, 2}}) {
    const int64_t n_cols = c.pos0 + c.n_rows;
    std::vector<float> scores = uniform(size_t(c.n_rows * n_cols), -4.0f, 4.0f);
    if (c.levels > 0) {
      std::uniform_int_distribution<int64_t> level(0, c.levels - 1);
      for (float& s : scores) s = float(level(rng_)) * 0.25f;
      for (size_t i = 0; i < scores.size(); i += 7) scores[i] = -0.0f;
    }
    for (int64_t t = 0; t < c.n_rows; ++t) {  // masked columns, as indexer_scores leaves them
      for (int64_t j = c.pos0 + t + 1; j < n_cols; ++j) {
        scores[size_t(t * n_cols + j)] = -std::numeric_limits<float>::infinity();
      }
    }
    std::vector<int32_t> expected(size_t(c.n_rows * c.top_k));
    cpu_.top_k_positions(scores.data(), c.n_rows, n_cols, c.pos0, c.top_k, expected.data());
    auto gs = upload(scores);
    auto gp = poisoned(expected.size() * sizeof(int32_t));
    gpu_->top_k_positions(gs.as<float>(), c.n_rows, n_cols, c.pos0, c.top_k, gp.as<int32_t>());
    const auto got = download<int32_t>(gp, expected.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], expected[i])
          << "row " << i / size_t(c.top_k) << " slot " << i % size_t(c.top_k) << ", top_k "
          << c.top_k << ", pos0 " << c.pos0 << ", levels " << c.levels << " (" << where() << ")";
    }
  }
}

// Attention over each row's chosen cells, MLA's shape (one KV head, dk = dv + 64). Both sides
// attend one query at the end of a gathered cache of top_k cells: F32 cells 1e-5 a (float32
// online softmax on both, in other orders); F16 cells 1e-2 a (the CPU's F16 decode path keeps
// its query and accumulator in half, 1.2e-3 .. 3.5e-3 a measured in cuda_backend_test.cpp).
TEST_F(CudaSparseAttentionTest, AttentionSelectedMatchesCpu) {
  struct Case {
    KvElement type;
    int64_t n_head, dk, dv, capacity, pos0, n_tokens, top_k;
  };
  for (const Case& c : {Case{KvElement::kF32, 8, 96, 32, 256, 100, 5, 16},
                        Case{KvElement::kF16, 16, 576, 512, 4096, 3000, 2, 2048},
                        Case{KvElement::kF16, 4, 48, 32, 64, 20, 30, 6}}) {
    Cache cache = make_cache(c.type, c.dk, c.dv, c.capacity, c.pos0 + c.n_tokens);
    // Each row's choice: top_k distinct positions up to its own, ascending.
    std::vector<int32_t> positions(size_t(c.n_tokens * c.top_k));
    for (int64_t t = 0; t < c.n_tokens; ++t) {
      std::vector<int32_t> all(size_t(c.pos0 + t + 1));
      for (size_t i = 0; i < all.size(); ++i) all[i] = int32_t(i);
      std::shuffle(all.begin(), all.end(), rng_);
      all.resize(size_t(c.top_k));
      std::sort(all.begin(), all.end());
      std::copy(all.begin(), all.end(), positions.begin() + t * c.top_k);
    }
    const float scale = 1.0f / std::sqrt(float(c.dk));
    const auto q =
        uniform(size_t(c.n_tokens * c.n_head * c.dk), -4.0f * scale * 6, 4.0f * scale * 6);
    AttentionCall call;
    call.q = q.data();
    call.n_tokens = c.n_tokens;
    call.n_head = c.n_head;
    call.pos0 = c.pos0;
    call.scale = scale;
    call.kv = cache.cpu_view;
    std::vector<float> expected(size_t(c.n_tokens * c.n_head * c.dv));
    call.out = expected.data();
    cpu_.attention_selected(call, positions.data(), c.top_k);
    auto gq = upload(q);
    auto gp = upload(positions);
    auto gout = poisoned(expected.size() * sizeof(float));
    call.q = gq.as<float>();
    call.out = gout.as<float>();
    call.kv = cache.gpu_view;
    gpu_->attention_selected(call, gp.as<int32_t>(), c.top_k);
    const auto got = download<float>(gout, expected.size());
    const auto cells_of = [&](int64_t t) {
      std::vector<int64_t> cells;
      for (int64_t j = 0; j < c.top_k; ++j)
        cells.push_back(positions[size_t(t * c.top_k + j)] % c.capacity);
      return cells;
    };
    expect_attention_close(
        cache, q, c.n_tokens, c.n_head, scale, got, expected, cells_of,
        c.type == KvElement::kF32 ? 1e-5 : 1e-2,
        "selected dk " + std::to_string(c.dk) + " top_k " + std::to_string(c.top_k));
  }
}

// Ordinary attention over MLA's latent cache rows at DeepSeek V3's sizes: one KV head of 576
// (kv_lora_rank 512 + 64 rotary) / 512, 128 query heads decoding and 16 in a chunk. No
// specialised kernel takes dk != dv; the generic one must (shared memory: 16 rows of 576 plus a
// tile of 576 and 512). Tolerances as AttentionSelectedMatchesCpu's (the CPU's tiled F16 path
// for 64+ tokens is float32: the same 1e-2 a bound covers it).
TEST_F(CudaSparseAttentionTest, MlaLatentRowsAttention) {
  struct Case {
    KvElement type;
    int64_t n_head, n_tokens, pos0, capacity;
  };
  for (const Case& c :
       {Case{KvElement::kF16, 128, 1, 900, 1024}, Case{KvElement::kF32, 128, 1, 300, 512},
        Case{KvElement::kF16, 16, 70, 30, 256}}) {
    const int64_t dk = 576, dv = 512;
    Cache cache = make_cache(c.type, dk, dv, c.capacity, c.pos0 + c.n_tokens);
    const float scale = 1.0f / std::sqrt(192.0f);  // DeepSeek's: 1 / √(nope + rope) of a head
    const auto q = uniform(size_t(c.n_tokens * c.n_head * dk), -0.3f, 0.3f);
    AttentionCall call;
    call.q = q.data();
    call.n_tokens = c.n_tokens;
    call.n_head = c.n_head;
    call.pos0 = c.pos0;
    call.scale = scale;
    call.kv = cache.cpu_view;
    std::vector<float> expected(size_t(c.n_tokens * c.n_head * dv));
    call.out = expected.data();
    cpu_.attention(call);
    auto gq = upload(q);
    auto gout = poisoned(expected.size() * sizeof(float));
    call.q = gq.as<float>();
    call.out = gout.as<float>();
    call.kv = cache.gpu_view;
    gpu_->attention(call);
    const auto got = download<float>(gout, expected.size());
    const auto cells_of = [&](int64_t t) {
      std::vector<int64_t> cells;
      for (int64_t p = 0; p <= c.pos0 + t; ++p) cells.push_back(p % c.capacity);
      return cells;
    };
    expect_attention_close(
        cache, q, c.n_tokens, c.n_head, scale, got, expected, cells_of,
        c.type == KvElement::kF32 ? 1e-5 : 1e-2,
        "mla 576/512 heads " + std::to_string(c.n_head) + " tokens " + std::to_string(c.n_tokens));
  }
}

// MLA's per-head products: one matmul_experts over n_tokens × n_head rows, row r through matrix
// r % n_head — more rows than one launch's grid takes (65535), so the launcher's slices and
// their boundaries are exercised. matmul_experts is bit-equal, row for row, to matmul of that
// matrix on that row alone (expert_matmul.h): checked bit for bit on rows around every slice
// boundary and a random sample.
TEST_F(CudaSparseAttentionTest, MatmulExpertsBeyondOneLaunch) {
  // Both types' weights stay alive till the end: host weights must not change while the backend
  // lives (its mirror keeps the first copy of an address; a second vector at a freed one's
  // address would be read from the stale copy).
  std::deque<std::vector<uint8_t>> host_weights;
  for (const QType type : {QType::F32, QType::Q8_0}) {
    const int64_t n_head = 128, n_cols = 64, n_rows = 48, rows = 70000;
    const size_t matrix_bytes = size_t(*row_bytes(type, uint64_t(n_cols))) * size_t(n_rows);
    std::vector<uint8_t>& weights = host_weights.emplace_back(matrix_bytes * size_t(n_head));
    for (int64_t h = 0; h < n_head; ++h) {
      const auto bytes = random_weight_rows(type, n_rows, n_cols, rng_);
      std::memcpy(weights.data() + size_t(h) * matrix_bytes, bytes.data(), matrix_bytes);
    }
    const ExpertStack stack{type, weights.data(), int64_t(matrix_bytes), n_head, n_cols, n_rows};
    std::vector<int32_t> ids(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) ids[size_t(r)] = int32_t(r % n_head);
    const auto x = uniform(size_t(rows * n_cols), -1.0f, 1.0f);
    auto gx = upload(x);
    auto gids = upload(ids);
    auto gy = poisoned(size_t(rows * n_rows) * sizeof(float));
    gpu_->matmul_experts(stack, gids.as<int32_t>(), rows, gx.as<float>(), false, gy.as<float>());
    const auto got = download<float>(gy, size_t(rows * n_rows));
    std::vector<int64_t> check = {0, 1, 65533, 65534, 65535, 65536, rows - 1};
    std::uniform_int_distribution<int64_t> any(0, rows - 1);
    for (int i = 0; i < 64; ++i) check.push_back(any(rng_));
    auto one = poisoned(size_t(n_rows) * sizeof(float));
    for (const int64_t r : check) {
      gpu_->matmul(stack.matrix(ids[size_t(r)]), gx.as<float>() + r * n_cols, one.as<float>(), 1);
      const auto want = download<float>(one, size_t(n_rows));
      for (int64_t i = 0; i < n_rows; ++i) {
        const float g = got[size_t(r * n_rows + i)];
        ASSERT_EQ(std::memcmp(&g, &want[size_t(i)], 4), 0)
            << qtype_name(type) << " row " << r << " output " << i << ": " << g << " vs "
            << want[size_t(i)] << " (" << where() << ")";
      }
    }
  }
}

}  // namespace
}  // namespace sluice::test

#else

TEST(CudaSparseAttentionTest, SkippedWithoutCuda) {
  GTEST_SKIP() << "built without the CUDA backend (SLUICE_CUDA=OFF or no nvcc)";
}

#endif
