// CudaBackend's mul_gate (an attention output gate: sigmoid or softplus, one logit per element
// or per head) and mul_rows (rows times a weight vector) against CpuBackend, on fresh random
// data each run (seed from the clock, in every failure message), device outputs poisoned with
// NaN (0xff bytes) before each launch. Tolerances:
//   - mul_rows: bit for bit (one rounded product per element on both);
//   - mul_gate's activated logits: sigmoid within 4 ulp (libm's expf is within ~0.5 ulp of the
//     correctly rounded value the device uses; an ulp of a large e = e^-g can move the rounded
//     1 + e by up to two ulps of its own, which the division carries: the H200 once measured
//     2.4e-7 relative, between 2 and 4 ulp, at g = -16.6); softplus
//     within 2^-23 + 2 ulp (an ulp of e^g can move the rounded 1 + e^g by one ulp, which log
//     turns into at most 2^-23 absolute, plus logf's own rounding); the identity above 20 exact;
//   - mul_gate's x: bit for bit against x times the device's own activated logit, since the
//     kernel multiplies by the very value it writes back.
// Skips visibly without the CUDA backend or a device.
#include <gtest/gtest.h>

#ifdef SLUICE_HAVE_CUDA

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda_test_fixture.h"
#include "sluice/error.h"

namespace sluice::test {
namespace {

uint32_t bits(float v) {
  uint32_t b = 0;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// The distance between adjacent floats at v's magnitude.
float ulp(float v) {
  const float a = std::fabs(v);
  return std::nextafter(a, INFINITY) - a;
}

class CudaGateTest : public CudaDeviceTest {
 protected:
  // NaN everywhere (0xff bytes), n floats: what the launch must overwrite. (Hides
  // CudaDeviceTest::poisoned, which makes DeviceBuffers and counts bytes.)
  std::unique_ptr<Allocation> poisoned(size_t n) { return poisoned_allocation(n * sizeof(float)); }
};

// The gate's tolerance against the CPU's activated logit (see the file comment).
float gate_tolerance(GateActivation act, float raw, float cpu) {
  if (act == GateActivation::kSigmoid) return 4.0f * ulp(cpu);
  if (raw > 20.0f) return 0.0f;
  return 0x1p-23f + 2.0f * ulp(cpu);
}

TEST_F(CudaGateTest, MulGateMatchesTheCpuPerElementAndPerHead) {
  struct Shape {
    int64_t n_head, dv;
  };
  for (GateActivation act : {GateActivation::kSoftplus, GateActivation::kSigmoid}) {
    for (Shape shape : {Shape{6, 40}, Shape{32, 128}, Shape{3, 7}}) {
      for (bool per_head : {true, false}) {
        for (int64_t n_rows : {1, 3, 37}) {
          const int64_t n_cols = shape.n_head * shape.dv;
          const int64_t n_gate = per_head ? shape.n_head : n_cols;
          const std::string what =
              std::string(act == GateActivation::kSoftplus ? "softplus" : "sigmoid") +
              (per_head ? " per head" : " per element") + " rows " + std::to_string(n_rows) +
              " cols " + std::to_string(n_cols) + ", " + where();
          const auto x = uniform(size_t(n_rows * n_cols), -4.0f, 4.0f);
          // Past 20 on both sides of softplus's switch, and far enough down that e^g is tiny.
          const auto gate = uniform(size_t(n_rows * n_gate), -30.0f, 30.0f);

          std::vector<float> cpu_x = x, cpu_gate = gate;
          cpu_.mul_gate(act, cpu_x.data(), cpu_gate.data(), n_rows, n_cols, n_gate);

          auto dx = poisoned(x.size());
          auto dgate = poisoned(gate.size());
          gpu_->upload(dx->data(), x.data(), x.size() * sizeof(float));
          gpu_->upload(dgate->data(), gate.data(), gate.size() * sizeof(float));
          gpu_->mul_gate(act, dx->data(), dgate->data(), n_rows, n_cols, n_gate);
          const auto gpu_x = fetch(*dx, x.size());
          const auto gpu_gate = fetch(*dgate, gate.size());

          for (size_t j = 0; j < gate.size(); ++j) {
            ASSERT_FALSE(std::isnan(gpu_gate[j])) << what << ": logit " << j << " never written";
            EXPECT_LE(std::fabs(gpu_gate[j] - cpu_gate[j]),
                      gate_tolerance(act, gate[j], cpu_gate[j]))
                << what << ": logit " << j << " (" << gate[j] << ") gpu " << gpu_gate[j] << " cpu "
                << cpu_gate[j];
          }
          const int64_t per_logit = n_cols / n_gate;
          for (int64_t r = 0; r < n_rows; ++r) {
            for (int64_t i = 0; i < n_cols; ++i) {
              const size_t at = size_t(r * n_cols + i);
              const float expected = x[at] * gpu_gate[size_t(r * n_gate + i / per_logit)];
              ASSERT_EQ(bits(gpu_x[at]), bits(expected))
                  << what << ": x[" << r << ", " << i << "] gpu " << gpu_x[at] << " expected "
                  << expected;
            }
          }
        }
      }
    }
  }
}

TEST_F(CudaGateTest, MulGateRefusesAGateThatDoesNotDivideTheRow) {
  auto dx = poisoned(10);
  auto dgate = poisoned(3);
  EXPECT_THROW(gpu_->mul_gate(GateActivation::kSoftplus, dx->data(), dgate->data(), 1, 10, 3),
               Error);
  EXPECT_THROW(cpu_.mul_gate(GateActivation::kSoftplus, nullptr, nullptr, 1, 10, 3), Error);
}

// The weight once as a device pointer and once as a host pointer (mirrored on first use). Host
// weights must not change while the backend lives (its mirror keeps the first copy of an
// address), so every one stays alive till the end: a later vector at a freed one's address would
// be read from the stale copy.
TEST_F(CudaGateTest, MulRowsIsBitExact) {
  std::deque<std::vector<float>> host_weights;
  for (int64_t n_rows : {1, 5, 130}) {
    for (int64_t n_cols : {2048, 1001, 3}) {
      const std::string what =
          "rows " + std::to_string(n_rows) + " cols " + std::to_string(n_cols) + ", " + where();
      const auto x = uniform(size_t(n_rows * n_cols), -8.0f, 8.0f);
      const std::vector<float>& weight =
          host_weights.emplace_back(uniform(size_t(n_cols), -2.0f, 2.0f));
      std::vector<float> expected = x;
      cpu_.mul_rows(expected.data(), weight.data(), n_rows, n_cols);
      auto dweight = on_device(weight);
      for (const float* w : {static_cast<const float*>(dweight->data()), weight.data()}) {
        auto dx = poisoned(x.size());
        gpu_->upload(dx->data(), x.data(), x.size() * sizeof(float));
        gpu_->mul_rows(dx->data(), w, n_rows, n_cols);
        const auto got = fetch(*dx, x.size());
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_EQ(bits(got[i]), bits(expected[i]))
              << what << (w == weight.data() ? " (host weight)" : " (device weight)")
              << ": element " << i << " gpu " << got[i] << " cpu " << expected[i];
        }
      }
    }
  }
}

}  // namespace
}  // namespace sluice::test

#else

TEST(CudaGateTest, Skipped) {
  GTEST_SKIP() << "CUDA backend not built (no nvcc at configure time)";
}

#endif
