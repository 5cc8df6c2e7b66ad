// Q8_1 and Q8_K, the activation formats gguf-py does not implement, checked against their
// definition in ggml's reference quantizers: exact small cases, invariants, round-trip bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"
#include "quant/blocks.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"
#include "sluice/error.h"

namespace sluice {
namespace {

std::vector<float> random_row(int n, float scale, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> row(size_t(n), 0.0f);
  for (auto& v : row) v = dist(gen);
  return row;
}

TEST(QuantQ8K, ExactSmallCase) {
  std::vector<float> x(kQK_K, 0.0f);
  x[0] = 2.0f;    // the extreme is positive, so iscale = -127/2 is negative
  x[1] = -1.0f;   // -63.5 * -1 = 63.5: ties round to even -> 64
  x[2] = 1.0f;    // -63.5 -> -64
  x[3] = 0.5f;    // -31.75 -> -32
  x[17] = -2.0f;  // +127: the clamp at +127 holds
  BlockQ8_K b;
  quantize_row(QType::Q8_K, x.data(), &b, kQK_K);
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[1], 64);
  EXPECT_EQ(b.qs[2], -64);
  EXPECT_EQ(b.qs[3], -32);
  EXPECT_EQ(b.qs[17], 127);
  EXPECT_EQ(b.d, 1.0f / (-127.0f / 2.0f));
  EXPECT_EQ(b.bsums[0], -127 + 64 - 64 - 32);
  EXPECT_EQ(b.bsums[1], 127);
  for (int g = 2; g < kQK_K / 16; ++g) EXPECT_EQ(b.bsums[g], 0);
}

TEST(QuantQ8K, ZeroBlockIsAllZero) {
  std::vector<float> x(2 * kQK_K, 0.0f);
  x[kQK_K + 3] = -4.0f;  // the second block is not zero
  BlockQ8_K b[2];
  std::memset(b, 0xab, sizeof(b));
  quantize_row(QType::Q8_K, x.data(), b, 2 * kQK_K);
  EXPECT_EQ(b[0].d, 0.0f);
  for (int j = 0; j < kQK_K; ++j) EXPECT_EQ(b[0].qs[j], 0);
  for (int g = 0; g < kQK_K / 16; ++g) EXPECT_EQ(b[0].bsums[g], 0);
  EXPECT_EQ(b[1].qs[3], -127);  // the extreme always maps to -127, whatever its sign
  EXPECT_EQ(b[1].d, 1.0f / (-127.0f / -4.0f));
}

TEST(QuantQ8K, InvariantsAndRoundTrip) {
  const int n = 8 * kQK_K;
  const auto x = random_row(n, 3.0f, 42);
  std::vector<BlockQ8_K> blocks(n / kQK_K);
  quantize_row(QType::Q8_K, x.data(), blocks.data(), n);
  std::vector<float> y(size_t(n), 0.0f);
  dequantize_row(QType::Q8_K, blocks.data(), y.data(), n);
  for (int i = 0; i < n / kQK_K; ++i) {
    const BlockQ8_K& b = blocks[size_t(i)];
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += b.qs[16 * g + j];
      EXPECT_EQ(b.bsums[g], sum);
    }
    for (int j = 0; j < kQK_K; ++j) {
      EXPECT_GE(b.qs[j], -127);  // never -128
      const size_t k = size_t(i * kQK_K + j);
      // Half a quantization step, plus float slack.
      EXPECT_LE(std::fabs(y[k] - x[k]), 0.5f * std::fabs(b.d) * 1.0001f);
    }
  }
}

TEST(QuantQ81, ExactSmallCase) {
  float x[kQK8_1] = {};
  x[0] = -127.0f;  // d = 1, id = 1
  x[1] = 2.5f;     // round half away from zero -> 3
  x[2] = -2.5f;    // -> -3
  x[3] = 0.49f;
  BlockQ8_1 b;
  quantize_row(QType::Q8_1, x, &b, kQK8_1);
  EXPECT_EQ(fp16_to_fp32(b.d), 1.0f);
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[1], 3);
  EXPECT_EQ(b.qs[2], -3);
  EXPECT_EQ(b.qs[3], 0);
  EXPECT_EQ(fp16_to_fp32(b.s), -127.0f);  // d * sum(qs)
}

TEST(QuantQ81, SumAndRoundTrip) {
  const int n = 64 * kQK8_1;
  const auto x = random_row(n, 0.7f, 7);
  std::vector<BlockQ8_1> blocks(n / kQK8_1);
  quantize_row(QType::Q8_1, x.data(), blocks.data(), n);
  std::vector<float> y(size_t(n), 0.0f);
  dequantize_row(QType::Q8_1, blocks.data(), y.data(), n);
  for (int i = 0; i < n / kQK8_1; ++i) {
    const BlockQ8_1& b = blocks[size_t(i)];
    float amax = 0.0f;
    int sum = 0;
    for (int j = 0; j < kQK8_1; ++j) {
      amax = std::fmax(amax, std::fabs(x[size_t(i * kQK8_1 + j)]));
      sum += b.qs[j];
    }
    const float d = amax / 127.0f;
    EXPECT_EQ(b.d, fp32_to_fp16(d));
    EXPECT_EQ(b.s, fp32_to_fp16(float(sum) * d));
    for (int j = 0; j < kQK8_1; ++j) {
      const size_t k = size_t(i * kQK8_1 + j);
      // The stored half d differs from the float d used to round: allow its relative error.
      EXPECT_LE(std::fabs(y[k] - x[k]), 0.5f * d + 127.0f * d * 0x1p-11f);
    }
  }
}

TEST(QuantizeRow, SupportedTypesAndErrors) {
  for (QType t :
       {QType::F32, QType::F16, QType::BF16, QType::Q4_0, QType::Q4_1, QType::Q5_0, QType::Q5_1,
        QType::Q8_0, QType::Q8_1, QType::Q8_K, QType::MXFP4, QType::TQ1_0, QType::TQ2_0}) {
    EXPECT_TRUE(quantize_supported(t)) << qtype_name(t);
  }
  EXPECT_FALSE(quantize_supported(QType::IQ2_XXS));
  EXPECT_FALSE(quantize_supported(QType::I32));
  float x[kQK8_0] = {};
  BlockQ8_0 b[2];
  EXPECT_THROW(quantize_row(QType::Q8_0, x, b, 31), Error);
  EXPECT_THROW(quantize_row(QType::IQ2_XXS, x, b, kQK_K), Error);
}

}  // namespace
}  // namespace sluice
