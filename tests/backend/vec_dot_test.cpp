// Every dot product against the float64 truth and every SIMD kernel against the scalar
// reference (quant/dot_reference.h), for every weight type and every ISA this CPU runs.
// Tolerances are relative to sum |w_i x_i| of the dequantized rows (worst seen over 200 random
// 4096-wide rows per type in parentheses):
//   reference vs float64:  1e-6 (4e-8): float block scales, float accumulation over blocks;
//                          1e-4 for Q4_1 / Q5_1 (2.3e-6): their Q8_1 partner stores d * sum(q)
//                          as a half, off by up to 2^-11 of the minimum term by design (ggml's).
//   SIMD vs reference:     1e-6 (4e-8): the same integers; only float summation order differs.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/vec_dot.h"
#include "quant/dot_reference.h"
#include "quant_test_data.h"
#include "sluice/error.h"

namespace sluice::test {
namespace {

using cpu::CpuIsa;

constexpr double kReferenceTolerance = 1e-6;
constexpr double kQ8_1Tolerance = 1e-4;
constexpr double kKernelTolerance = 1e-6;

// Column counts: one block, an odd number of blocks (unrolled loops' tails), a large row.
std::vector<int64_t> column_counts(QType type) {
  const int64_t block = traits_of(type).block_size;
  if (block == 1) return {1, 7, 31, 33, 1000, 4096 + 13};
  if (block == 32) return {32, 96, 32 * 13, 4096};
  return {256, 768, 4096};
}

// The test parameter: a weight type that prints by name in gtest's messages.
struct WeightType {
  QType type;
  friend void PrintTo(const WeightType& weight, std::ostream* out) {
    *out << qtype_name(weight.type);
  }
};

std::vector<WeightType> all_weight_types() {
  std::vector<WeightType> out;
  for (const QType type : dot_weight_types()) out.push_back({type});
  return out;
}

std::string type_name(const testing::TestParamInfo<WeightType>& info) {
  return std::string(qtype_name(info.param.type));
}

class VecDot : public testing::TestWithParam<WeightType> {
 protected:
  // Checks the `isa` kernel of the parameter type against the reference on random rows,
  // read from addresses 4 bytes past a 64-byte boundary (never 32-byte aligned).
  void check_kernel(CpuIsa isa) {
    const QType type = GetParam().type;
    const QType act = *activation_type_for(type);
    const cpu::VecDotKernel kernel = cpu::vec_dot_kernel(type, isa);
    ASSERT_NE(kernel.fn, nullptr);
    std::mt19937 rng(1234 + uint32_t(type));
    for (const int64_t n : column_counts(type)) {
      for (int trial = 0; trial < 4; ++trial) {
        const std::vector<uint8_t> w = random_weight_rows(type, 1, n, rng);
        const std::vector<uint8_t> x = random_activation_row(act, n, rng);
        std::vector<uint8_t> w_buffer(w.size() + 68), x_buffer(x.size() + 68);
        uint8_t* w_at = align_plus4(w_buffer.data());
        uint8_t* x_at = align_plus4(x_buffer.data());
        std::copy(w.begin(), w.end(), w_at);
        std::copy(x.begin(), x.end(), x_at);
        const float expected = vec_dot_reference(type, w.data(), x.data(), n);
        const float got = kernel.fn(w_at, x_at, n);
        const ExactDot exact = exact_dot(type, w.data(), act, x.data(), n);
        EXPECT_LE(std::fabs(double(got) - double(expected)), kKernelTolerance * exact.magnitude)
            << qtype_name(type) << " " << cpu::isa_name(kernel.isa) << " n=" << n << " trial "
            << trial << ": got " << got << ", reference " << expected;
      }
    }
  }

  static uint8_t* align_plus4(uint8_t* p) {
    const auto address = reinterpret_cast<uintptr_t>(p);
    return p + ((64 - address % 64) % 64) + 4;
  }
};

TEST_P(VecDot, ReferenceMatchesFloat64) {
  const QType type = GetParam().type;
  const QType act = *activation_type_for(type);
  const double tolerance = act == QType::Q8_1 ? kQ8_1Tolerance : kReferenceTolerance;
  std::mt19937 rng(99 + uint32_t(type));
  for (const int64_t n : column_counts(type)) {
    for (int trial = 0; trial < 4; ++trial) {
      const std::vector<uint8_t> w = random_weight_rows(type, 1, n, rng);
      const std::vector<uint8_t> x = random_activation_row(act, n, rng);
      const ExactDot exact = exact_dot(type, w.data(), act, x.data(), n);
      const float got = vec_dot_reference(type, w.data(), x.data(), n);
      ASSERT_GT(exact.magnitude, 0.0);
      EXPECT_LE(std::fabs(double(got) - exact.value), tolerance * exact.magnitude)
          << qtype_name(type) << " n=" << n << " trial " << trial << ": got " << got << ", exact "
          << exact.value;
    }
  }
}

TEST_P(VecDot, Avx2MatchesReference) {
  if (!cpu::isa_supported(CpuIsa::kAvx2)) GTEST_SKIP() << "CPU lacks AVX2/FMA/F16C";
  check_kernel(CpuIsa::kAvx2);
}

TEST_P(VecDot, Avx512MatchesReference) {
  if (!cpu::isa_supported(CpuIsa::kAvx512)) {
    GTEST_SKIP() << "CPU lacks AVX-512 (F, BW, VL and VNNI are all needed)";
  }
  check_kernel(CpuIsa::kAvx512);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, VecDot, testing::ValuesIn(all_weight_types()), type_name);

TEST(VecDotTable, ActivationTypesAreGgmls) {
  EXPECT_EQ(*activation_type_for(QType::Q4_0), QType::Q8_0);
  EXPECT_EQ(*activation_type_for(QType::Q5_1), QType::Q8_1);
  EXPECT_EQ(*activation_type_for(QType::Q6_K), QType::Q8_K);
  EXPECT_EQ(*activation_type_for(QType::IQ4_XS), QType::Q8_K);
  EXPECT_EQ(*activation_type_for(QType::MXFP4), QType::Q8_0);
  EXPECT_EQ(*activation_type_for(QType::BF16), QType::BF16);
  EXPECT_FALSE(activation_type_for(QType::Q8_K));
  EXPECT_FALSE(activation_type_for(QType::TQ1_0));
  EXPECT_EQ(dot_weight_types().size(), 23u);
}

// Registration guard: every type has its own AVX2 kernel; the AVX-512 table's picks (own or
// inherited from AVX2) are printed so a run on such a machine shows the coverage.
TEST(VecDotTable, EveryTypeHasAnAvx2Kernel) {
  if (!cpu::isa_supported(CpuIsa::kAvx2)) GTEST_SKIP() << "CPU lacks AVX2/FMA/F16C";
  for (const QType type : dot_weight_types()) {
    EXPECT_EQ(cpu::vec_dot_kernel(type, CpuIsa::kAvx2).isa, CpuIsa::kAvx2) << qtype_name(type);
  }
  if (!cpu::isa_supported(CpuIsa::kAvx512)) return;
  std::string picks;
  for (const QType type : dot_weight_types()) {
    picks += std::string(qtype_name(type)) + ":" +
             std::string(cpu::isa_name(cpu::vec_dot_kernel(type, CpuIsa::kAvx512).isa)) + " ";
  }
  RecordProperty("avx512_table", picks);
  std::cout << "avx512 table: " << picks << "\n";
}

TEST(VecDotTable, RefusesMisuse) {
  std::vector<uint8_t> bytes(1024);
  EXPECT_THROW(vec_dot_reference(QType::Q4_0, bytes.data(), bytes.data(), 48), Error);
  EXPECT_THROW(vec_dot_reference(QType::TQ2_0, bytes.data(), bytes.data(), 256), Error);
  EXPECT_EQ(cpu::vec_dot_kernel(QType::I32, CpuIsa::kScalar).fn, nullptr);
}

}  // namespace
}  // namespace sluice::test
