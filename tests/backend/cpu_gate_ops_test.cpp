// CpuBackend's mul_gate and mul_rows (cpu_gate_ops.cpp) against a float64 statement of their
// semantics, on fresh random data (seed from the clock, in every failure message): which logit
// scales which value (one per element, or one per head broadcast over its values), the
// activated logits left in place, softplus's identity above 20. Tolerance for the activations:
// 4 float ulp of the float64 value plus 2^-23 absolute (float exp, then 1 + e rounded, then
// float log: the rounding of 1 + e moves log by up to 2^-24, the libm calls by under 1 ulp
// each); the products x * gate are then checked bit for bit against the op's own logits.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/seeded_test.h"
#include "sluice/error.h"

namespace sluice::test {
namespace {

double reference(GateActivation act, double g) {
  if (act == GateActivation::kSigmoid) return 1.0 / (1.0 + std::exp(-g));
  return g > 20.0 ? g : std::log1p(std::exp(g));
}

float ulp(float v) {
  const float a = std::fabs(v);
  return std::nextafter(a, INFINITY) - a;
}

class CpuGateOpsTest : public SeededTest {
 protected:
  cpu::CpuBackend cpu_{nullptr};
};

TEST_F(CpuGateOpsTest, MulGateActivatesInPlaceAndBroadcastsPerHead) {
  const int64_t n_rows = 5, n_head = 4, dv = 6, n_cols = n_head * dv;
  for (GateActivation act : {GateActivation::kSoftplus, GateActivation::kSigmoid}) {
    for (int64_t n_gate : {n_head, n_cols}) {
      const std::string what =
          std::string(act == GateActivation::kSigmoid ? "sigmoid" : "softplus") + " n_gate " +
          std::to_string(n_gate) + ", " + where();
      const auto x = uniform(size_t(n_rows * n_cols), -3.0f, 3.0f);
      const auto raw = uniform(size_t(n_rows * n_gate), -25.0f, 25.0f);
      std::vector<float> got_x = x, gate = raw;
      cpu_.mul_gate(act, got_x.data(), gate.data(), n_rows, n_cols, n_gate);
      for (size_t j = 0; j < raw.size(); ++j) {
        const double expected = reference(act, raw[j]);
        if (act == GateActivation::kSoftplus && raw[j] > 20.0f) {
          EXPECT_EQ(gate[j], raw[j]) << what << ": softplus above 20 is the identity";
        }
        EXPECT_LE(std::fabs(gate[j] - expected), 4.0 * ulp(float(expected)) + 0x1p-23)
            << what << ": logit " << j << " (" << raw[j] << ") got " << gate[j] << " expected "
            << expected;
      }
      const int64_t per_logit = n_cols / n_gate;
      for (int64_t r = 0; r < n_rows; ++r) {
        for (int64_t i = 0; i < n_cols; ++i) {
          const size_t at = size_t(r * n_cols + i);
          const float expected = x[at] * gate[size_t(r * n_gate + i / per_logit)];
          ASSERT_EQ(std::memcmp(&got_x[at], &expected, sizeof(float)), 0)
              << what << ": x[" << r << ", " << i << "] got " << got_x[at] << " expected "
              << expected;
        }
      }
    }
  }
}

TEST_F(CpuGateOpsTest, MulGateRefusesAGateThatDoesNotDivideTheRow) {
  std::vector<float> x(10, 1.0f), gate(3, 1.0f);
  EXPECT_THROW(cpu_.mul_gate(GateActivation::kSigmoid, x.data(), gate.data(), 1, 10, 3), Error);
  EXPECT_THROW(cpu_.mul_gate(GateActivation::kSigmoid, x.data(), gate.data(), 1, 10, 0), Error);
}

TEST_F(CpuGateOpsTest, MulRowsMultipliesEveryRowByTheWeights) {
  const int64_t n_rows = 3, n_cols = 17;
  const auto x = uniform(size_t(n_rows * n_cols), -5.0f, 5.0f);
  const auto weight = uniform(size_t(n_cols), -2.0f, 2.0f);
  std::vector<float> got = x;
  cpu_.mul_rows(got.data(), weight.data(), n_rows, n_cols);
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t i = 0; i < n_cols; ++i) {
      const size_t at = size_t(r * n_cols + i);
      EXPECT_EQ(got[at], x[at] * weight[size_t(i)]) << "x[" << r << ", " << i << "], " << where();
    }
  }
}

}  // namespace
}  // namespace sluice::test
