// CpuBackend's tiled K-quant matmul (backend/cpu/tiled_kquant.h) against a plain scalar
// statement of llama.cpp b11549's tiled arithmetic, bit for bit, on random weights (every bit
// pattern, quant_test_data.h) and activations drawn fresh each run (the seed is printed on
// failure): batches of 8, 9 and 17 tokens, row counts off the 16-row tile, one and three
// threads. Below 8 tokens matmul must still be the table's single dot product. The IQ grid
// types, whose integer decoding the scalar statement does not repeat, are held to the float64
// dot product instead.
#include "backend/cpu/tiled_kquant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/activation_quantize.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/vec_dot.h"
#include "backend/quant_test_data.h"
#include "core/half.h"
#include "quant/blocks.h"
#include "quant/dot_reference.h"
#include "quant/iq_tables.h"

namespace sluice::test {
namespace {

// One 256-element block as the tiled path sees it: integer values, scale and min per 16.
struct BlockInts {
  int w[256];
  int scale[16];
  int min[16];
  float d;
  float dmin;
  bool has_min;
};

void k4_scale_min(const uint8_t* p, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = p[j] & 63, *min = p[j + 4] & 63;
  } else {
    *scale = (p[j + 4] & 0xf) | ((p[j - 4] >> 6) << 4);
    *min = (p[j + 4] >> 4) | ((p[j] >> 6) << 4);
  }
}

// Element e of a Q2_K / Q3_K block: 2 bits of byte 32 * (e / 128) + e % 32.
int two_bits(const uint8_t* qs, int e) {
  return (qs[32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3;
}

BlockInts decode(QType type, const uint8_t* block) {
  BlockInts v{};
  if (type == QType::Q4_K || type == QType::Q5_K) {
    const bool five = type == QType::Q5_K;
    const auto* q4 = reinterpret_cast<const BlockQ4_K*>(block);
    const auto* q5 = reinterpret_cast<const BlockQ5_K*>(block);
    const uint8_t* scales = five ? q5->scales : q4->scales;
    const uint8_t* qs = five ? q5->qs : q4->qs;
    v.d = fp16_to_fp32(five ? q5->d : q4->d), v.dmin = fp16_to_fp32(five ? q5->dmin : q4->dmin);
    v.has_min = true;
    for (int e = 0; e < 256; ++e) {
      const int sub = e / 32;
      v.w[e] = (qs[32 * (sub / 2) + e % 32] >> (4 * (sub % 2))) & 0xf;
      if (five) v.w[e] |= ((q5->qh[e % 32] >> sub) & 1) << 4;
      k4_scale_min(scales, sub, &v.scale[e / 16], &v.min[e / 16]);
    }
  } else if (type == QType::Q6_K) {
    const auto* x = reinterpret_cast<const BlockQ6_K*>(block);
    v.d = fp16_to_fp32(x->d);
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, l = e % 32, quarter = (e % 128) / 32;
      const int low = (x->ql[64 * h + l + 32 * (quarter % 2)] >> (4 * (quarter / 2))) & 0xf;
      const int high = (x->qh[32 * h + l] >> (2 * quarter)) & 3;
      v.w[e] = (low | (high << 4)) - 32;
    }
    for (int g = 0; g < 16; ++g) v.scale[g] = x->scales[g];
  } else if (type == QType::Q2_K) {
    const auto* x = reinterpret_cast<const BlockQ2_K*>(block);
    v.d = fp16_to_fp32(x->d), v.dmin = fp16_to_fp32(x->dmin);
    v.has_min = true;
    for (int e = 0; e < 256; ++e) v.w[e] = two_bits(x->qs, e);
    for (int g = 0; g < 16; ++g) v.scale[g] = x->scales[g] & 0xf, v.min[g] = x->scales[g] >> 4;
  } else if (type == QType::Q3_K) {
    const auto* x = reinterpret_cast<const BlockQ3_K*>(block);
    v.d = fp16_to_fp32(x->d);
    for (int e = 0; e < 256; ++e) {
      v.w[e] = two_bits(x->qs, e) - (((x->hmask[e % 32] >> (e / 32)) & 1) ? 0 : 4);
    }
    for (int g = 0; g < 16; ++g) {
      const int low = g < 8 ? (x->scales[g] & 0xf) : (x->scales[g - 8] >> 4);
      v.scale[g] = (low | (((x->scales[8 + g % 4] >> (2 * (g / 4))) & 3) << 4)) - 32;
    }
  } else if (type == QType::IQ4_XS) {
    const auto* x = reinterpret_cast<const BlockIQ4_XS*>(block);
    v.d = fp16_to_fp32(x->d);
    for (int e = 0; e < 256; ++e) {
      const int ib = e / 32, j = e % 16;
      const uint8_t byte = x->qs[16 * ib + j];
      v.w[e] = kValuesIq4nl[(e % 32) < 16 ? (byte & 0xf) : (byte >> 4)];
      v.scale[e / 16] = (((x->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) |
                         (((x->scales_h >> (2 * ib)) & 3) << 4)) -
                        32;
    }
  }
  return v;
}

// The tiled arithmetic, one element at a time (tiled_kquant.h).
float tiled_reference(QType type, const uint8_t* w_row, const uint8_t* x_row, int64_t n_cols,
                      cpu::TiledAccumulate accumulate) {
  const size_t block_bytes = *row_bytes(type, 256);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_cols / 256; ++b) {
    const BlockInts v = decode(type, w_row + b * block_bytes);
    BlockQ8_K x;
    std::memcpy(&x, x_row + b * sizeof(BlockQ8_K), sizeof(x));
    int32_t s1 = 0, s2 = 0;
    for (int g = 0; g < 16; ++g) {
      int32_t dot = 0;
      for (int e = 16 * g; e < 16 * g + 16; ++e) dot += v.w[e] * x.qs[e];
      s1 += v.scale[g] * dot;
      s2 += v.min[g] * x.bsums[g];
    }
    float res = v.d * float(s1);
    if (v.has_min) res = std::fma(-v.dmin, float(s2), res);
    if (accumulate == cpu::TiledAccumulate::kFused) {
      acc = std::fma(res, x.d, acc);
    } else {
      acc = acc + res * x.d;  // -ffp-contract=off: two roundings
    }
  }
  return acc;
}

struct Problem {
  std::vector<uint8_t> w;   // [n_rows] weight rows
  std::vector<float> x;     // [n_tokens, n_cols]
  std::vector<uint8_t> xq;  // [n_tokens] Q8_K rows, as matmul quantizes them
  size_t w_row, x_row;
};

Problem make_problem(QType type, int64_t n_rows, int64_t n_tokens, int64_t n_cols,
                     std::mt19937& rng) {
  Problem p;
  p.w = random_weight_rows(type, n_rows, n_cols, rng);
  p.w_row = *row_bytes(type, n_cols);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  p.x.resize(size_t(n_tokens * n_cols));
  for (float& v : p.x) v = dist(rng);
  p.x_row = *row_bytes(QType::Q8_K, n_cols);
  p.xq.resize(p.x_row * size_t(n_tokens));
  const auto quantize = cpu::activation_quantizer(QType::Q8_K);
  for (int64_t t = 0; t < n_tokens; ++t) {
    quantize(p.x.data() + t * n_cols, p.xq.data() + t * p.x_row, n_cols);
  }
  return p;
}

uint32_t fresh_seed() {
  return std::random_device{}();
}

TEST(TiledKquant, TakesOverFromEightTokensForTheKAndIqTypes) {
  for (QType type : {QType::Q4_K, QType::Q6_K, QType::IQ4_XS, QType::IQ1_M}) {
    EXPECT_TRUE(cpu::tiled_kquant_type(type)) << qtype_name(type);
  }
  for (QType type : {QType::Q8_0, QType::Q4_0, QType::IQ4_NL, QType::F16, QType::TQ2_0}) {
    EXPECT_FALSE(cpu::tiled_kquant_type(type)) << qtype_name(type);
  }
  if (!cpu::isa_supported(cpu::CpuIsa::kAvx2)) GTEST_SKIP() << "CPU lacks AVX2";
  for (int64_t n = 1; n < 8; ++n) EXPECT_FALSE(cpu::use_tiled_kquant(QType::Q4_K, n)) << n;
  EXPECT_TRUE(cpu::use_tiled_kquant(QType::Q4_K, 8));
  EXPECT_TRUE(cpu::use_tiled_kquant(QType::Q6_K, 300));
}

TEST(TiledKquant, MatchesTheScalarStatementBitForBit) {
  if (!cpu::isa_supported(cpu::CpuIsa::kAvx2)) GTEST_SKIP() << "CPU lacks AVX2";
  const uint32_t seed = fresh_seed();
  std::mt19937 rng(seed);
  ThreadPool pool(3);
  const int64_t n_cols = 768;
  for (QType type :
       {QType::Q4_K, QType::Q6_K, QType::Q5_K, QType::Q2_K, QType::Q3_K, QType::IQ4_XS}) {
    for (int64_t n_tokens : {8, 9, 17}) {
      for (int64_t n_rows : {5, 37}) {
        const Problem p = make_problem(type, n_rows, n_tokens, n_cols, rng);
        for (ThreadPool* threads : {static_cast<ThreadPool*>(nullptr), &pool}) {
          cpu::CpuBackend backend(threads);
          std::vector<float> y(size_t(n_tokens * n_rows));
          backend.matmul(MatrixView{type, p.w.data(), n_cols, n_rows}, p.x.data(), y.data(),
                         n_tokens);
          for (int64_t t = 0; t < n_tokens; ++t) {
            for (int64_t r = 0; r < n_rows; ++r) {
              const float want =
                  tiled_reference(type, p.w.data() + r * p.w_row, p.xq.data() + t * p.x_row, n_cols,
                                  cpu::tiled_accumulate());
              ASSERT_EQ(y[size_t(t * n_rows + r)], want)
                  << qtype_name(type) << " tokens " << n_tokens << " rows " << n_rows << " token "
                  << t << " row " << r << " seed " << seed;
            }
          }
        }
      }
    }
  }
}

// The kernel with the other last step than this CPU's (AVX-512 VNNI's unfused one on AVX2),
// called directly: both variants are checked wherever AVX2 runs.
TEST(TiledKquant, BothAccumulationStepsMatchTheScalarStatement) {
  if (!cpu::isa_supported(cpu::CpuIsa::kAvx2)) GTEST_SKIP() << "CPU lacks AVX2";
  const uint32_t seed = fresh_seed();
  std::mt19937 rng(seed);
  const int64_t n_cols = 1024, n_rows = 18, n_tokens = 11;
  for (QType type : {QType::Q4_K, QType::Q6_K}) {
    const Problem p = make_problem(type, n_rows, n_tokens, n_cols, rng);
    std::vector<uint8_t> packed(cpu::tiled_activation_bytes(n_tokens, n_cols));
    cpu::pack_tiled_activations_avx2(type, p.xq.data(), int64_t(p.x_row), n_tokens, n_cols,
                                     packed.data());
    for (auto how : {cpu::TiledAccumulate::kFused, cpu::TiledAccumulate::kMultiplyThenAdd}) {
      std::vector<float> y(size_t(n_tokens * n_rows));
      cpu::tiled_kquant_rows_avx2(type, p.w.data(), int64_t(p.w_row), 0, n_rows, packed.data(),
                                  n_tokens, n_cols, y.data(), n_rows, how);
      for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t r = 0; r < n_rows; ++r) {
          ASSERT_EQ(y[size_t(t * n_rows + r)],
                    tiled_reference(type, p.w.data() + r * p.w_row, p.xq.data() + t * p.x_row,
                                    n_cols, how))
              << qtype_name(type) << " token " << t << " row " << r << " seed " << seed;
        }
      }
    }
  }
}

TEST(TiledKquant, IqGridTypesAgreeWithTheExactDotProduct) {
  if (!cpu::isa_supported(cpu::CpuIsa::kAvx2)) GTEST_SKIP() << "CPU lacks AVX2";
  const uint32_t seed = fresh_seed();
  std::mt19937 rng(seed);
  const int64_t n_cols = 512, n_rows = 19, n_tokens = 9;
  for (QType type : {QType::IQ2_XXS, QType::IQ2_XS, QType::IQ2_S, QType::IQ3_XXS, QType::IQ3_S,
                     QType::IQ1_S, QType::IQ1_M}) {
    const Problem p = make_problem(type, n_rows, n_tokens, n_cols, rng);
    cpu::CpuBackend backend(nullptr);
    std::vector<float> y(size_t(n_tokens * n_rows));
    backend.matmul(MatrixView{type, p.w.data(), n_cols, n_rows}, p.x.data(), y.data(), n_tokens);
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t r = 0; r < n_rows; ++r) {
        const ExactDot exact = exact_dot(type, p.w.data() + r * p.w_row, QType::Q8_K,
                                         p.xq.data() + t * p.x_row, n_cols);
        EXPECT_NEAR(y[size_t(t * n_rows + r)], exact.value, 1e-6 * exact.magnitude)
            << qtype_name(type) << " token " << t << " row " << r << " seed " << seed;
      }
    }
  }
}

TEST(TiledKquant, FewerThanEightTokensStayOnTheDotProduct) {
  const uint32_t seed = fresh_seed();
  std::mt19937 rng(seed);
  const int64_t n_cols = 512, n_rows = 21;
  for (QType type : {QType::Q4_K, QType::Q6_K}) {
    const VecDotFn dot = cpu::vec_dot_kernel(type).fn;
    for (int64_t n_tokens = 1; n_tokens < 8; ++n_tokens) {
      const Problem p = make_problem(type, n_rows, n_tokens, n_cols, rng);
      cpu::CpuBackend backend(nullptr);
      std::vector<float> y(size_t(n_tokens * n_rows));
      backend.matmul(MatrixView{type, p.w.data(), n_cols, n_rows}, p.x.data(), y.data(), n_tokens);
      for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t r = 0; r < n_rows; ++r) {
          ASSERT_EQ(y[size_t(t * n_rows + r)],
                    dot(p.w.data() + r * p.w_row, p.xq.data() + t * p.x_row, n_cols))
              << qtype_name(type) << " tokens " << n_tokens << " seed " << seed;
        }
      }
    }
  }
}

}  // namespace
}  // namespace sluice::test
