// CudaBackend::glu_matmul (the GLU and the down product's activation quantization in one
// kernel, cuda_glu_quantize.cu, then the product): gate and y must be BIT-EQUAL to the glu op
// followed by the matmul op on the same device — the two launches it replaces — for every
// activation format (Q8_K for the K and IQ types, Q8_0, Q8_1 for Q4_1), every GLU, one to eight
// tokens; and a float weight (no int8 decode) or nine tokens must take the two ops. Fresh random
// data each run (the seed in every failure message), outputs poisoned. Skips visibly without
// the CUDA backend or a device.
#include <gtest/gtest.h>

#ifdef SLUICE_HAVE_CUDA

#include <string>
#include <vector>

#include "backend/cuda_test_fixture.h"
#include "backend/quant_test_data.h"

namespace sluice::test {
namespace {

class CudaGluMatmulTest : public CudaDeviceTest {
 protected:
  // One case: glu_matmul against glu + matmul, both on gpu_.
  void check(QType type, GluActivation act, int64_t n_tokens, int64_t n_ff, int64_t n_out) {
    const std::string what = std::string(qtype_name(type)) + ", act " + std::to_string(int(act)) +
                             ", " + std::to_string(n_tokens) + " tokens, n_ff " +
                             std::to_string(n_ff);
    const std::vector<uint8_t> w = random_weight_rows(type, n_out, n_ff, rng_);
    const MatrixView view{type, w.data(), n_ff, n_out};
    // Gate values across the activations' interesting ranges (GELU's table edges at ±10).
    const std::vector<float> gate = uniform(size_t(n_tokens * n_ff), -12.0f, 12.0f);
    const std::vector<float> up = uniform(size_t(n_tokens * n_ff), -8.0f, 8.0f);
    const size_t n_y = size_t(n_tokens * n_out);
    auto gate_fused = on_device(gate), gate_plain = on_device(gate), up_d = on_device(up);
    auto y_fused = poisoned_allocation(n_y * 4), y_plain = poisoned_allocation(n_y * 4);
    gpu_->glu_matmul(view, act, gate_fused->data(), up_d->data(), y_fused->data(), n_tokens);
    gpu_->glu(act, gate_plain->data(), up_d->data(), n_tokens, n_ff);
    gpu_->matmul(view, gate_plain->data(), y_plain->data(), n_tokens);
    expect_bits(fetch(*gate_fused, gate.size()), fetch(*gate_plain, gate.size()), what + ": gate");
    expect_bits(fetch(*y_fused, n_y), fetch(*y_plain, n_y), what + ": y");
  }
};

TEST_F(CudaGluMatmulTest, EqualsGluThenMatmulBitForBit) {
  const GluActivation acts[] = {GluActivation::kSilu, GluActivation::kGeluTanh,
                                GluActivation::kGeluTanhF16, GluActivation::kSwigluOai};
  for (QType type : {QType::Q4_K, QType::Q6_K, QType::IQ4_XS, QType::Q8_0, QType::Q4_1}) {
    for (GluActivation act : acts) {
      for (int64_t n_tokens : {1, 3, 8}) check(type, act, n_tokens, 512, 96);
    }
  }
  check(QType::Q4_K, GluActivation::kSilu, 1, 1536, 200);  // a real FFN width
}

TEST_F(CudaGluMatmulTest, OtherShapesTakeTheTwoOps) {
  check(QType::F16, GluActivation::kSilu, 2, 256, 64);   // float weights: no int8 decode
  check(QType::Q4_K, GluActivation::kSilu, 9, 256, 64);  // a prefill chunk
}

}  // namespace
}  // namespace sluice::test

#else

TEST(CudaGluMatmulTest, Skipped) {
  GTEST_SKIP() << "CUDA backend not built (no nvcc at configure time)";
}

#endif
