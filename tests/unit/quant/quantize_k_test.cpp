// The K-quant quantizers (quant/quantize_k.h) decoded by our reference dequantizer: bounded
// error on random rows, exact zeros, sane edge inputs, determinism and argument checking. The
// comparison with llama.cpp's own quantizers is tests/e2e/test_kquant_rmse.py.
#include "quant/quantize_k.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/dequantize.h"
#include "sluice/error.h"

namespace sluice {
namespace {

constexpr int kRow = 4 * kQK_K;

// Quantizes with our quantizer, decodes with dequantize_row; returns the decoded row.
std::vector<float> round_trip(QType type, const std::vector<float>& x) {
  const int64_t n = int64_t(x.size());
  std::vector<unsigned char> blocks(n / kQK_K * traits_of(type).block_bytes + 16);
  void* dst = blocks.data();  // vector storage is aligned for any of the block structs
  switch (type) {
    case QType::Q2_K:
      quantize_row_q2_k(x.data(), static_cast<BlockQ2_K*>(dst), n);
      break;
    case QType::Q3_K:
      quantize_row_q3_k(x.data(), static_cast<BlockQ3_K*>(dst), n);
      break;
    case QType::Q4_K:
      quantize_row_q4_k(x.data(), static_cast<BlockQ4_K*>(dst), n);
      break;
    case QType::Q5_K:
      quantize_row_q5_k(x.data(), static_cast<BlockQ5_K*>(dst), n);
      break;
    case QType::Q6_K:
      quantize_row_q6_k(x.data(), static_cast<BlockQ6_K*>(dst), n);
      break;
    default:
      ADD_FAILURE() << "not a K type";
  }
  std::vector<float> y(x.size());
  dequantize_row(type, dst, y.data(), n);
  return y;
}

double relative_rmse(const std::vector<float>& x, const std::vector<float>& y) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    ref += double(x[i]) * x[i];
  }
  return std::sqrt(err / ref);
}

struct Case {
  QType type;
  double max_gaussian_error;  // relative RMSE on N(0, 1): llama.cpp's reference gets about
                              // 0.297, 0.151, 0.071, 0.036, 0.018 (tests/golden/kquant_rmse.json)
};

class QuantizeK : public testing::TestWithParam<Case> {};

TEST_P(QuantizeK, GaussianErrorIsBounded) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(kRow);
  for (float& v : x) v = normal(rng);
  EXPECT_LT(relative_rmse(x, round_trip(GetParam().type, x)), GetParam().max_gaussian_error);
}

TEST_P(QuantizeK, ZerosStayZero) {
  const std::vector<float> x(kRow, 0.0f);
  for (float v : round_trip(GetParam().type, x)) ASSERT_EQ(v, 0.0f);
}

TEST_P(QuantizeK, ConstantAndOneHotRowsAreClose) {
  for (const float c : {1.0f, -3.5f, 1e-3f}) {
    const std::vector<float> x(kRow, c);
    const std::vector<float> y = round_trip(GetParam().type, x);
    for (float v : y) ASSERT_NEAR(v, c, std::fabs(c) * 0.02f) << "constant " << c;
  }
  std::vector<float> x(kRow, 0.0f);
  x[100] = 5.0f;  // one large value in an otherwise empty super-block
  const std::vector<float> y = round_trip(GetParam().type, x);
  EXPECT_NEAR(y[100], 5.0f, 0.1f);
  EXPECT_NEAR(y[101], 0.0f, 0.1f);
}

TEST_P(QuantizeK, HugeAndNonFiniteInputStayDefined) {
  std::vector<float> x(kRow, 0.0f);
  for (int i = 0; i < kRow; ++i) x[i] = float((i * 37) % 101 - 50) * 1e6f;  // beyond fp16 scales
  for (float v : round_trip(GetParam().type, x)) ASSERT_FALSE(std::isinf(v));
  x[3] = NAN;
  x[700] = INFINITY;
  round_trip(GetParam().type, x);  // any encoding will do; it must not crash or trap
}

TEST_P(QuantizeK, IsDeterministic) {
  std::mt19937 rng(11);
  std::student_t_distribution<float> heavy(3.0f);
  std::vector<float> x(kRow);
  for (float& v : x) v = heavy(rng);
  EXPECT_EQ(round_trip(GetParam().type, x), round_trip(GetParam().type, x));
}

INSTANTIATE_TEST_SUITE_P(KTypes, QuantizeK,
                         testing::Values(Case{QType::Q2_K, 0.27}, Case{QType::Q3_K, 0.146},
                                         Case{QType::Q4_K, 0.071}, Case{QType::Q5_K, 0.035},
                                         Case{QType::Q6_K, 0.0175}),
                         [](const auto& info) { return std::string(qtype_name(info.param.type)); });

TEST(QuantizeK, RejectsPartialBlocks) {
  std::vector<float> x(300, 1.0f);
  std::vector<BlockQ4_K> out(2);
  EXPECT_THROW(quantize_row_q4_k(x.data(), out.data(), 300), Error);
  EXPECT_THROW(quantize_row_q6_k(x.data(), nullptr, -256), Error);
}

}  // namespace
}  // namespace sluice
