// CpuBackend's ops against plain double-precision references: RMS norm, both RoPE styles,
// attention (full, sliding, grouped heads, F32 and F16 cells, ring wrap-around), the GLU
// activations, and matmul against per-row reference dot products for every thread count.
#include "backend/cpu/cpu_backend.h"

#include "backend/cpu/activation_quantize.h"
#include "backend/cpu/vec_dot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/half.h"
#include "quant/dot_reference.h"
#include "quant/quantize.h"

namespace sluice::test {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(CpuBackend, RmsNormMatchesDouble) {
  cpu::CpuBackend backend(nullptr);
  const auto x = random_floats(3 * 40, 1);
  const auto w = random_floats(40, 2);
  std::vector<float> y(x.size());
  backend.rms_norm(x.data(), w.data(), y.data(), 3, 40, 1e-5f);
  for (int r = 0; r < 3; ++r) {
    double ss = 0;
    for (int i = 0; i < 40; ++i) ss += double(x[r * 40 + i]) * x[r * 40 + i];
    const double f = 1.0 / std::sqrt(ss / 40 + 1e-5);
    for (int i = 0; i < 40; ++i) EXPECT_NEAR(y[r * 40 + i], x[r * 40 + i] * f * w[i], 1e-5);
  }
}

TEST(CpuBackend, RopeRotatesPairsOrHalves) {
  cpu::CpuBackend backend(nullptr);
  const int64_t head_dim = 8;
  for (RopeStyle style : {RopeStyle::kNormal, RopeStyle::kNeox}) {
    auto x = random_floats(2 * head_dim, 3);
    const auto original = x;
    RopeConfig config{style, head_dim, 10000.0f, 1.0f, nullptr};
    backend.rope(x.data(), 2, 1, head_dim, 5, config);
    for (int t = 0; t < 2; ++t) {
      for (int i = 0; i < head_dim / 2; ++i) {
        const double theta = (5 + t) * std::pow(10000.0, -2.0 * i / head_dim);
        const int a = style == RopeStyle::kNormal ? 2 * i : i;
        const int b = style == RopeStyle::kNormal ? 2 * i + 1 : i + head_dim / 2;
        const double x0 = original[t * head_dim + a], x1 = original[t * head_dim + b];
        EXPECT_NEAR(x[t * head_dim + a], x0 * std::cos(theta) - x1 * std::sin(theta), 1e-5);
        EXPECT_NEAR(x[t * head_dim + b], x0 * std::sin(theta) + x1 * std::cos(theta), 1e-5);
      }
    }
  }
}

// Plain softmax attention of one query over positions [first, pos].
std::vector<double> naive_attention(const float* q, const std::vector<float>& keys,
                                    const std::vector<float>& values, int64_t first, int64_t pos,
                                    int64_t dim, float scale) {
  std::vector<double> scores;
  double max_score = -1e300;
  for (int64_t p = first; p <= pos; ++p) {
    double s = 0;
    for (int64_t d = 0; d < dim; ++d) s += double(q[d]) * keys[size_t(p * dim + d)];
    scores.push_back(s * scale);
    max_score = std::max(max_score, scores.back());
  }
  double sum = 0;
  for (double& s : scores) sum += (s = std::exp(s - max_score));
  std::vector<double> out(size_t(dim), 0.0);
  for (int64_t p = first; p <= pos; ++p) {
    for (int64_t d = 0; d < dim; ++d) {
      out[size_t(d)] += scores[size_t(p - first)] / sum * values[size_t(p * dim + d)];
    }
  }
  return out;
}

// tolerance: 2e-5 where values accumulate in float32; chunks of fewer than 64 tokens on F16
// cells keep the accumulator in half precision (as llama.cpp does), which costs ~2^-11 a step.
void check_attention(KvElement element, int64_t window, int64_t capacity, int64_t n_tokens,
                     int64_t pos0, ThreadPool* pool, double tolerance = 2e-5,
                     const float* sinks = nullptr, std::vector<float>* result = nullptr) {
  cpu::CpuBackend backend(pool);
  const int64_t dim = 16, n_head = 4, n_head_kv = 2, n_pos = pos0 + n_tokens;
  // One key/value stream per KV head; positions before pos0 were stored earlier.
  std::vector<std::vector<float>> keys, values;
  for (int h = 0; h < n_head_kv; ++h) {
    keys.push_back(random_floats(size_t(n_pos * dim), 10 + h));
    values.push_back(random_floats(size_t(n_pos * dim), 20 + h));
    if (element == KvElement::kF16) {  // compare against what the cells can hold
      for (float& v : keys.back()) v = fp16_to_fp32(fp32_to_fp16(v));
      for (float& v : values.back()) v = fp16_to_fp32(fp32_to_fp16(v));
    }
  }
  const size_t cell_bytes = element == KvElement::kF16 ? 2 : 4;
  std::vector<uint8_t> k(size_t(capacity * n_head_kv * dim) * cell_bytes);
  std::vector<uint8_t> v(k.size());
  KvLayerView kv{element, k.data(), v.data(), capacity, n_head_kv, dim, dim};
  for (int64_t p = 0; p < n_pos; ++p) {  // store position by position, as decoding would
    std::vector<float> k_row, v_row;
    for (int h = 0; h < n_head_kv; ++h) {
      k_row.insert(k_row.end(), keys[h].begin() + p * dim, keys[h].begin() + (p + 1) * dim);
      v_row.insert(v_row.end(), values[h].begin() + p * dim, values[h].begin() + (p + 1) * dim);
    }
    backend.kv_store(kv, k_row.data(), v_row.data(), 1, p);
  }
  auto q = random_floats(size_t(n_tokens * n_head * dim), 30);
  if (element == KvElement::kF16) {
    for (float& x : q) x = fp16_to_fp32(fp32_to_fp16(x));
  }
  std::vector<float> out(size_t(n_tokens * n_head * dim));
  AttentionCall call;
  call.q = q.data();
  call.out = out.data();
  call.n_tokens = n_tokens;
  call.n_head = n_head;
  call.pos0 = pos0;
  call.window = window;
  call.scale = 0.25f;
  call.sinks = sinks;
  call.kv = kv;
  backend.attention(call);
  if (result != nullptr) *result = out;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t pos = pos0 + t;
    const int64_t first = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
    for (int64_t h = 0; h < n_head; ++h) {
      const int64_t kv_head = h / (n_head / n_head_kv);
      const auto expected = naive_attention(q.data() + (t * n_head + h) * dim, keys[kv_head],
                                            values[kv_head], first, pos, dim, 0.25f);
      for (int64_t d = 0; d < dim; ++d) {
        EXPECT_NEAR(out[size_t((t * n_head + h) * dim + d)], expected[size_t(d)], tolerance)
            << "token " << t << " head " << h << " dim " << d;
      }
    }
  }
}

TEST(CpuBackend, AttentionFullF32) {
  check_attention(KvElement::kF32, 0, 64, 5, 7, nullptr);
}

TEST(CpuBackend, AttentionF16CellsThreaded) {
  ThreadPool pool(3);
  check_attention(KvElement::kF16, 0, 64, 6, 3, &pool, 3e-3);
}

TEST(CpuBackend, AttentionTiledPathForLongChunks) {
  // 70 tokens in one call take the tiled path (64+ rows, F16 cells), with and without a window.
  ThreadPool pool(2);
  check_attention(KvElement::kF16, 0, 200, 70, 30, &pool);
  check_attention(KvElement::kF16, 50, 200, 70, 30, &pool);
}

// The AVX2 tiled kernel against the scalar tiled path it must equal bit for bit: sinks of -inf
// change no number (e^-inf adds 0) but send a chunk of 64+ tokens down the scalar path.
TEST(CpuBackend, AttentionTiledAvx2EqualsScalarBitForBit) {
  if (!cpu::isa_supported(cpu::CpuIsa::kAvx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  ThreadPool pool(2);
  const std::vector<float> no_sinks(4, -std::numeric_limits<float>::infinity());
  for (const int64_t window : {int64_t(0), int64_t(50)}) {
    std::vector<float> avx2, scalar;
    check_attention(KvElement::kF16, window, 200, 70, 30, &pool, 2e-5, nullptr, &avx2);
    check_attention(KvElement::kF16, window, 200, 70, 30, &pool, 2e-5, no_sinks.data(), &scalar);
    ASSERT_EQ(avx2.size(), scalar.size());
    EXPECT_EQ(std::memcmp(avx2.data(), scalar.data(), avx2.size() * sizeof(float)), 0)
        << "window " << window;
  }
}

TEST(CpuBackend, AttentionSlidingWindowOnAWrappedRing) {
  // window 4, ring of window + n_batch - 1 = 6 cells, 20 positions written: the ring wrapped.
  check_attention(KvElement::kF32, 4, 6, 3, 17, nullptr);
}

TEST(CpuBackend, GluActivations) {
  cpu::CpuBackend backend(nullptr);
  auto gate = random_floats(50, 4, 3.0f);
  const auto up = random_floats(50, 5);
  auto silu = gate, gelu = gate;
  backend.glu(GluActivation::kSilu, silu.data(), up.data(), 5, 10);
  backend.glu(GluActivation::kGeluTanh, gelu.data(), up.data(), 5, 10);
  for (int i = 0; i < 50; ++i) {
    const double g = gate[i];
    EXPECT_NEAR(silu[i], g / (1 + std::exp(-g)) * up[i], 1e-5);
    const double tanh_gelu =
        0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g)));
    EXPECT_NEAR(gelu[i], tanh_gelu * up[i], 1e-5);
  }
}

TEST(CpuBackend, MatmulEqualsReferenceDotsForAnyThreadCount) {
  const int64_t n_cols = 256, n_rows = 37, n_tokens = 5;
  for (QType type : {QType::F32, QType::F16, QType::Q8_0, QType::Q4_1, QType::Q4_K}) {
    const auto weights_f = random_floats(size_t(n_rows * n_cols), 6);
    const size_t row = *row_bytes(type, n_cols);
    std::vector<uint8_t> w(row * n_rows);
    if (type != QType::Q4_K) {
      for (int64_t r = 0; r < n_rows; ++r) {
        quantize_row(type, weights_f.data() + r * n_cols, w.data() + r * row, n_cols);
      }
    } else {  // any bytes are a valid Q4_K block set; masking keeps the half scales finite
      std::mt19937 rng(9);
      for (auto& b : w) b = uint8_t(rng() & 0x3f);
    }
    const auto x = random_floats(size_t(n_tokens * n_cols), 7);
    const QType act = *activation_type_for(type);
    std::vector<uint8_t> xq(*row_bytes(act, n_cols));
    std::vector<float> expected(size_t(n_tokens * n_rows));
    for (int64_t t = 0; t < n_tokens; ++t) {
      quantize_row(act, x.data() + t * n_cols, xq.data(), n_cols);
      for (int64_t r = 0; r < n_rows; ++r) {
        expected[size_t(t * n_rows + r)] =
            vec_dot_reference(type, w.data() + r * row, xq.data(), n_cols);
      }
    }
    ThreadPool pool3(3);
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool3}) {
      cpu::CpuBackend backend(pool);
      std::vector<float> y(expected.size());
      backend.matmul(MatrixView{type, w.data(), n_cols, n_rows}, x.data(), y.data(), n_tokens);
      for (size_t i = 0; i < y.size(); ++i) {
        EXPECT_NEAR(y[i], expected[i], 1e-4 * (1 + std::abs(expected[i])))
            << qtype_name(type) << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

// Prefill (several tokens per call, four-row kernels where a type has one) must give exactly
// what decoding the same rows one token at a time gives.
TEST(CpuBackend, MatmulOfManyTokensEqualsOneTokenAtATime) {
  const int64_t n_cols = 320, n_rows = 9, n_tokens = 7;
  for (QType type : {QType::Q8_0, QType::Q4_1, QType::Q5_0, QType::Q4_0, QType::F16}) {
    const auto weights_f = random_floats(size_t(n_rows * n_cols), 11);
    const size_t row = *row_bytes(type, n_cols);
    std::vector<uint8_t> w(row * n_rows);
    for (int64_t r = 0; r < n_rows; ++r) {
      quantize_row(type, weights_f.data() + r * n_cols, w.data() + r * row, n_cols);
    }
    const MatrixView view{type, w.data(), n_cols, n_rows};
    const auto x = random_floats(size_t(n_tokens * n_cols), 12);
    cpu::CpuBackend backend(nullptr);
    std::vector<float> batched(size_t(n_tokens * n_rows)), single(batched.size());
    backend.matmul(view, x.data(), batched.data(), n_tokens);
    for (int64_t t = 0; t < n_tokens; ++t) {
      backend.matmul(view, x.data() + t * n_cols, single.data() + t * n_rows, 1);
    }
    EXPECT_EQ(batched, single) << qtype_name(type);
  }
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

// Where matmul reads activation scales converted once (the scaled kernels), every element must
// still be exactly the table's single dot product of that weight row and activation row, for
// any token count (groups of four and the rest) and block count (the AVX-512 kernels pair
// blocks: 10 and 11 blocks of 32).
TEST(CpuBackend, ScaledKernelsEqualTheSingleDotProduct) {
  const int64_t n_rows = 5, n_tokens = 7;
  for (QType type : {QType::Q4_1, QType::Q8_0, QType::Q4_0, QType::Q5_0}) {
    if (cpu::vec_dot_scaled_kernel(type) == nullptr) GTEST_SKIP() << "no scaled kernel here";
    for (const int64_t n_cols : {320, 352}) {
      const auto weights_f = random_floats(size_t(n_rows * n_cols), 21);
      const size_t row = *row_bytes(type, n_cols);
      std::vector<uint8_t> w(row * n_rows);
      for (int64_t r = 0; r < n_rows; ++r) {
        quantize_row(type, weights_f.data() + r * n_cols, w.data() + r * row, n_cols);
      }
      const auto x = random_floats(size_t(n_tokens * n_cols), 22);
      const QType act = *activation_type_for(type);
      const size_t act_row = *row_bytes(act, n_cols);
      std::vector<uint8_t> xq(act_row * n_tokens);
      const auto quantize = cpu::activation_quantizer(act);
      for (int64_t t = 0; t < n_tokens; ++t) {
        quantize(x.data() + t * n_cols, xq.data() + t * act_row, n_cols);
      }
      const VecDotFn dot = cpu::vec_dot_kernel(type).fn;
      cpu::CpuBackend backend(nullptr);
      std::vector<float> y(size_t(n_tokens * n_rows));
      backend.matmul(MatrixView{type, w.data(), n_cols, n_rows}, x.data(), y.data(), n_tokens);
      for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t r = 0; r < n_rows; ++r) {
          EXPECT_EQ(y[size_t(t * n_rows + r)],
                    dot(w.data() + r * row, xq.data() + t * act_row, n_cols))
              << qtype_name(type) << " " << n_cols << " columns, token " << t << " row " << r;
        }
      }
    }
  }
}

}  // namespace
}  // namespace sluice::test
