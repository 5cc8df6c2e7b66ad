// The AVX2 forms of the CPU's element-wise steps against their scalar loops, on fresh random data:
// the Q8_0 / Q8_1 activation quantizers byte for byte (activation_quantize_avx2.cpp) and
// swiglu_rows bit for bit (silu_avx2.cpp). Skips on a CPU without AVX2.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/cpu/activation_quantize.h"
#include "backend/cpu/silu.h"
#include "backend/cpu/vec_dot.h"
#include "quant/quantize.h"
#include "seeded_test.h"

namespace sluice::test {
namespace {

class CpuElementwiseAvx2 : public SeededTest {
 protected:
  void SetUp() override {
    if (!cpu::isa_supported(cpu::CpuIsa::kAvx2)) GTEST_SKIP() << "this CPU has no AVX2";
  }
};

TEST_F(CpuElementwiseAvx2, ActivationQuantizersGiveTheScalarBytes) {
  // Blocks of 32 at several magnitudes, then special blocks: all zeros; a block whose scale is
  // exactly 1 (amax 127) with halves to round to even; a single large value among tiny ones.
  std::vector<float> x;
  for (const float scale : {1e-3f, 1.0f, 37.0f, 3e4f}) {
    const auto block = uniform(32 * 5, -scale, scale);
    x.insert(x.end(), block.begin(), block.end());
  }
  x.insert(x.end(), 32, 0.0f);
  const float halves[] = {127.0f, 2.5f, 3.5f, -2.5f, -0.5f, 0.5f, 1.5f, -1.5f, 126.5f, -126.5f};
  for (int j = 0; j < 32; ++j) x.push_back(halves[j % 10]);
  const auto tiny = uniform(31, -1e-6f, 1e-6f);
  x.push_back(-5e3f);
  x.insert(x.end(), tiny.begin(), tiny.end());
  const int64_t n = int64_t(x.size());
  for (const QType type : {QType::Q8_0, QType::Q8_1}) {
    const size_t bytes = *row_bytes(type, n);
    std::vector<uint8_t> scalar(bytes), avx2(bytes, 0xab);
    cpu::activation_quantizer(type, cpu::CpuIsa::kScalar)(x.data(), scalar.data(), n);
    cpu::activation_quantizer(type, cpu::CpuIsa::kAvx2)(x.data(), avx2.data(), n);
    for (size_t i = 0; i < bytes; ++i) {
      ASSERT_EQ(avx2[i], scalar[i]) << qtype_name(type) << " byte " << i << " (" << where() << ")";
    }
  }
}

TEST_F(CpuElementwiseAvx2, SwigluGivesTheScalarBits) {
  // Rows of 45: five groups of eight and a scalar tail; gates far enough out that e^-x
  // overflows and underflows (the polynomial's two-step scaling and its saturation).
  const int64_t n_rows = 3, n_cols = 45;
  auto gate = uniform(size_t(n_rows * n_cols), -120.0f, 120.0f);
  const auto near = uniform(16, -4.0f, 4.0f);
  std::copy(near.begin(), near.end(), gate.begin() + 50);
  const auto up = uniform(gate.size(), -3.0f, 3.0f);
  auto scalar = gate, avx2 = gate;
  cpu::swiglu_rows_scalar(scalar.data(), up.data(), n_rows, n_cols);
  cpu::swiglu_rows_avx2(avx2.data(), up.data(), n_rows, n_cols);
  for (size_t i = 0; i < gate.size(); ++i) {
    uint32_t a, b;
    std::memcpy(&a, &avx2[i], 4);
    std::memcpy(&b, &scalar[i], 4);
    ASSERT_EQ(a, b) << "element " << i << " of gate " << gate[i] << ": " << avx2[i] << " vs "
                    << scalar[i] << " (" << where() << ")";
  }
}

}  // namespace
}  // namespace sluice::test
