// CudaBackend with CPU rounding (cuda_backend.h cpu_rounding) against the CPU backend: F16
// attention in the CPU's order of operations (cuda_attention_cpu_order.cu), prefill products
// on the decode kernels, and the 32-element types' products in the CPU kernels' float order
// (quant_int8_cpu_order.cuh). Skips without a CUDA device.
#ifdef SLUICE_HAVE_CUDA

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "backend/cpu/activation_quantize.h"
#include "backend/cpu/vec_dot.h"
#include "backend/cuda/cpu_order.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda_attention_case.h"
#include "backend/cuda_libm_probe.h"
#include "core/half.h"
#include "quant/dot_reference.h"
#include "quant/qtype.h"
#include "quant/quantize.h"
#include "quant_test_data.h"

namespace sluice::test {
namespace {

class CudaCpuRoundingTest : public CudaAttentionFixture {
 protected:
  void SetUp() override {
    CudaDeviceTest::SetUp();
    if (IsSkipped()) return;
    gpu_ = std::make_unique<cuda::CudaBackend>(0, /*cpu_rounding=*/true);
  }

  // n_rows x n_cols weights of `type` at w (kept alive by the caller: the device mirrors weights
  // by address) times fresh activations of n_tokens rows: bit-equal to the CPU backend's.
  void expect_product_matches(QType type, const uint8_t* w, int64_t n_rows, int64_t n_cols,
                              int64_t n_tokens) {
    const MatrixView view{type, w, n_cols, n_rows};
    const auto x = uniform(size_t(n_tokens * n_cols), -2.0f, 2.0f);
    std::vector<float> expected(size_t(n_tokens * n_rows));
    cpu_.matmul(view, x.data(), expected.data(), n_tokens);
    auto dx = upload(x);
    auto dy = poisoned(expected.size() * sizeof(float));
    gpu_->matmul(view, dx.as<float>(), dy.as<float>(), n_tokens);
    expect_bits(download<float>(dy, expected.size()), expected,
                std::string(qtype_name(type)) + " " + std::to_string(n_cols) + " columns, " +
                    std::to_string(n_tokens) + " tokens");
  }
  // Random valid weights of `type` for each column count, each multiplied with each token count.
  void expect_products_match(QType type, std::initializer_list<int64_t> col_counts,
                             std::initializer_list<int64_t> token_counts) {
    constexpr int64_t kRows = 37;
    for (const int64_t n_cols : col_counts) {
      kept_.push_back(random_weight_rows(type, kRows, n_cols, rng_));
      for (const int64_t n_tokens : token_counts) {
        expect_product_matches(type, kept_.back().data(), kRows, n_cols, n_tokens);
      }
    }
  }

  std::vector<std::vector<uint8_t>> kept_;  // weights the device may have mirrored

  // Both backends store the same history (F16 cells) and attend the last chunk. The CPU's
  // operations are reproduced one for one, glibc's expf included, so the outputs must be
  // identical. With a softcap every score goes through glibc's tanhf, which the device computes
  // correctly rounded and glibc up to ~2 ulp off (half the elements differed on the H200): a
  // 1-ulp weight flips half roundings of the accumulator, so there each element may differ by
  // at most 2^-9 of the row's largest |output| (a few half ulps carried on).
  void attend(const AttentionCase& c) {
    SCOPED_TRACE(std::string(c.name) + ", " + where());
    AttentionRun both;
    ASSERT_NO_FATAL_FAILURE(attend_both(c, both));
    const std::vector<float>&cpu_out = both.cpu_out, &gpu_out = both.gpu_out;
    const size_t out_n = cpu_out.size();
    size_t differing = 0;
    double worst = 0.0;
    for (size_t row = 0; row < out_n / size_t(c.dv); ++row) {
      double scale = 1e-30;
      for (int64_t d = 0; d < c.dv; ++d) {
        scale = std::max(scale, std::fabs(double(cpu_out[row * size_t(c.dv) + size_t(d)])));
      }
      for (int64_t d = 0; d < c.dv; ++d) {
        const size_t at = row * size_t(c.dv) + size_t(d);
        ASSERT_FALSE(std::isnan(gpu_out[at])) << "NaN at " << at;
        if (ulp_distance(gpu_out[at], cpu_out[at]) == 0) continue;
        ++differing;
        worst = std::max(worst, std::fabs(double(gpu_out[at]) - double(cpu_out[at])) / scale);
      }
    }
    std::printf("  %-24s %zu of %zu elements differ, worst %.2e of the row's max\n", c.name,
                differing, out_n, worst);
    if (c.softcap == 0.0f) {
      EXPECT_EQ(differing, 0u);
    } else {
      EXPECT_LE(worst, 0x1p-9);
    }
  }
};

// Chunks under 64 tokens: the CPU's half path (query and accumulator in half).
TEST_F(CudaCpuRoundingTest, HalfPathMatchesTheCpu) {
  attend({"decode 64, gqa 3", KvElement::kF16, 9, 3, 64, 64, 1, 300, 512, 0, 0.0f, false});
  attend({"decode 256, window", KvElement::kF16, 4, 1, 256, 256, 1, 700, 1024, 512, 0.0f, false});
  attend({"decode 128, sinks", KvElement::kF16, 8, 2, 128, 128, 3, 150, 256, 0, 0.0f, true});
  attend({"chunk 40, softcap", KvElement::kF16, 4, 4, 64, 64, 40, 20, 128, 0, 30.0f, false});
  attend({"dv 200 (tail of 8)", KvElement::kF16, 2, 1, 96, 200, 5, 60, 128, 0, 0.0f, false});
  attend({"wrapped ring", KvElement::kF16, 4, 2, 64, 64, 2, 1000, 256, 200, 0.0f, false});
}

// Chunks of 64 tokens or more: the CPU's tiled path (float query and accumulator, tiles of 64).
TEST_F(CudaCpuRoundingTest, TiledPathMatchesTheCpu) {
  attend({"prefill 64", KvElement::kF16, 9, 3, 64, 64, 64, 0, 128, 0, 0.0f, false});
  attend({"prefill 100 after 37", KvElement::kF16, 4, 1, 256, 256, 100, 37, 256, 0, 0.0f, false});
  attend({"prefill 130, window", KvElement::kF16, 8, 2, 128, 128, 130, 10, 256, 96, 0.0f, false});
  attend({"prefill 70, sinks", KvElement::kF16, 4, 2, 64, 64, 70, 5, 128, 0, 0.0f, true});
}

// A 100-token Q4_K product runs as decode launches of 8 tokens in the order of the CPU's tiled
// matmul (the CPU's path for 8 tokens or more): bit-equal to the CPU backend's whole product.
TEST_F(CudaCpuRoundingTest, ProductsOfLongChunksAreTheCpus) {
  const int64_t n_rows = 96, n_cols = 512, n_tokens = 100;
  const auto w = uniform(size_t(n_rows * n_cols), -1.0f, 1.0f);
  const int64_t row_size = int64_t(*row_bytes(QType::Q4_K, uint64_t(n_cols)));
  std::vector<uint8_t> q4k(size_t(n_rows * row_size));
  for (int64_t r = 0; r < n_rows; ++r) {
    quantize_row(QType::Q4_K, w.data() + r * n_cols, q4k.data() + r * row_size, n_cols);
  }
  expect_product_matches(QType::Q4_K, q4k.data(), n_rows, n_cols, n_tokens);
}

// The 32-element types' products in the float order of the CPU backend's kernels for this host
// (AVX-512 or AVX2): every output bit-equal to the CPU backend's, the activations quantized by
// both as the CPU does; block counts odd and even, in one staged chunk of 32 blocks and across
// two, for one token and three. Hosts whose CPU kernels are scalar skip (not replayed).
TEST_F(CudaCpuRoundingTest, BlockProductsAreTheCpusBitForBit) {
  if (cuda::host_cpu_order() == cuda::CpuOrder::kNone) {
    GTEST_SKIP() << "the CPU backend runs scalar kernels here; only AVX2 / AVX-512 are replayed";
  }
  for (QType type : {QType::Q8_0, QType::Q4_0, QType::Q4_1, QType::Q5_0, QType::Q5_1, QType::IQ4_NL,
                     QType::MXFP4}) {
    expect_products_match(type, {96, 1088, 1120}, {1, 3});
  }
}

// The float weight types' products in the order of the CPU backend's kernels for this host, the
// activations converted to the weight's type as the CPU converts them: bit-equal; rows with and
// without a tail past the last full step (40, 1000 and 1088 columns), 1, 3 and 8 tokens.
TEST_F(CudaCpuRoundingTest, FloatProductsAreTheCpusBitForBit) {
  if (cuda::host_cpu_order() == cuda::CpuOrder::kNone) {
    GTEST_SKIP() << "the CPU backend runs scalar kernels here; only AVX2 / AVX-512 are replayed";
  }
  for (QType type : {QType::F32, QType::F16, QType::BF16}) {
    expect_products_match(type, {40, 1000, 1088}, {1, 3, 8});
  }
}

// Every 256-element type (the K types, IQ4_XS, the grid IQ types) in the float order of the
// CPU backend's kernels for this host (AVX-512 ones for Q4_K, Q5_K and Q6_K where it has them,
// AVX2 ones otherwise), and from 8 tokens on in that of its tiled matmul: bit-equal to the CPU
// backend's, one super-block and several; 1 and 3 tokens (dot products), 8 and 20 (tiled).
TEST_F(CudaCpuRoundingTest, SuperBlockProductsAreTheCpusBitForBit) {
  if (cuda::host_cpu_order() == cuda::CpuOrder::kNone) {
    GTEST_SKIP() << "the CPU backend runs scalar kernels here; only AVX2 / AVX-512 are replayed";
  }
  for (QType type : {QType::Q2_K, QType::Q3_K, QType::Q4_K, QType::Q5_K, QType::Q6_K, QType::IQ4_XS,
                     QType::IQ2_XXS, QType::IQ2_XS, QType::IQ2_S, QType::IQ3_XXS, QType::IQ3_S,
                     QType::IQ1_S, QType::IQ1_M}) {
    expect_products_match(type, {256, 1536}, {1, 3, 8, 20});
  }
}

// The AVX2 kernels' order, replayed where the host runs AVX-512 (the H200's): a backend told to
// follow AVX2 against the CPU's AVX2 kernels called directly (cpu::vec_dot_kernel(type,
// kAvx2)) on the CPU's own quantized activations, every output bit-equal. Every weight type, one
// super-block and several, 1 and 3 tokens (decode products; from 8 tokens the tiled order,
// covered above).
TEST_F(CudaCpuRoundingTest, Avx2ProductsAreTheAvx2KernelsBitForBit) {
  if (!cpu::isa_supported(cpu::CpuIsa::kAvx2)) GTEST_SKIP() << "this CPU has no AVX2 kernels";
  cuda::CudaBackend avx2_gpu(0, /*cpu_rounding=*/true, cuda::CpuOrder::kAvx2);
  constexpr int64_t kRows = 37;
  for (QType type :
       {QType::Q2_K,    QType::Q3_K,   QType::Q4_K,  QType::Q5_K,    QType::Q6_K,  QType::IQ4_XS,
        QType::IQ2_XXS, QType::IQ2_XS, QType::IQ2_S, QType::IQ3_XXS, QType::IQ3_S, QType::IQ1_S,
        QType::IQ1_M,   QType::Q8_0,   QType::Q4_0,  QType::Q4_1,    QType::Q5_0,  QType::Q5_1,
        QType::IQ4_NL,  QType::MXFP4,  QType::F32,   QType::F16,     QType::BF16}) {
    const QType act = *activation_type_for(type);
    const cpu::VecDotKernel kernel = cpu::vec_dot_kernel(type, cpu::CpuIsa::kAvx2);
    ASSERT_EQ(kernel.isa, cpu::CpuIsa::kAvx2) << qtype_name(type);
    const bool float_weights = type == QType::F32 || type == QType::F16 || type == QType::BF16;
    for (const int64_t n_cols : {int64_t(float_weights ? 1000 : 256), int64_t(1536)}) {
      kept_.push_back(random_weight_rows(type, kRows, n_cols, rng_));
      const uint8_t* w = kept_.back().data();
      const size_t w_row = size_t(*row_bytes(type, uint64_t(n_cols)));
      const size_t x_row = size_t(*row_bytes(act, uint64_t(n_cols)));
      for (const int64_t n_tokens : {int64_t(1), int64_t(3)}) {
        const auto x = uniform(size_t(n_tokens * n_cols), -2.0f, 2.0f);
        std::vector<uint8_t> xq(x_row * size_t(n_tokens));
        std::vector<float> expected(size_t(n_tokens * kRows));
        for (int64_t t = 0; t < n_tokens; ++t) {
          if (act == QType::F32) {
            std::memcpy(xq.data() + size_t(t) * x_row, x.data() + t * n_cols, x_row);
          } else {
            cpu::activation_quantizer(act)(x.data() + t * n_cols, xq.data() + size_t(t) * x_row,
                                           n_cols);
          }
          for (int64_t r = 0; r < kRows; ++r) {
            expected[size_t(t * kRows + r)] =
                kernel.fn(w + size_t(r) * w_row, xq.data() + size_t(t) * x_row, n_cols);
          }
        }
        auto dx = upload(x);
        auto dy = poisoned(expected.size() * sizeof(float));
        avx2_gpu.matmul(MatrixView{type, w, n_cols, kRows}, dx.as<float>(), dy.as<float>(),
                        n_tokens);
        avx2_gpu.synchronize();  // its own stream; download() waits on the fixture's
        expect_bits(download<float>(dy, expected.size()), expected,
                    std::string(qtype_name(type)) + " AVX2, " + std::to_string(n_cols) +
                        " columns, " + std::to_string(n_tokens) + " tokens");
      }
    }
  }
}

// RoPE turns by the CPU's own angles (glibc's cosf / sinf, cuda_rope_angles.h): bit-equal to
// the CPU backend's, at early positions and across the table's growth past 4096 positions.
TEST_F(CudaCpuRoundingTest, RopeIsTheCpusBitForBit) {
  const int64_t n_tokens = 40, n_head = 3, head_dim = 64;
  for (const RopeStyle style : {RopeStyle::kNormal, RopeStyle::kNeox}) {
    for (const int64_t pos0 : {int64_t(0), int64_t(100), int64_t(4090)}) {
      RopeConfig config;
      config.style = style;
      config.n_rot = head_dim;
      config.freq_base = style == RopeStyle::kNormal ? 10000.0f : 1000000.0f;
      const auto x = uniform(size_t(n_tokens * n_head * head_dim), -3.0f, 3.0f);
      std::vector<float> expected = x;
      cpu_.rope(expected.data(), n_tokens, n_head, head_dim, pos0, config);
      auto dx = upload(x);
      gpu_->rope(dx.as<float>(), n_tokens, n_head, head_dim, pos0, config);
      expect_bits(download<float>(dx, x.size()), expected,
                  "rope from position " + std::to_string(pos0));
    }
  }
}

// glibc's expf is not correctly rounded (~1 input in 13 000 rounds the other way), and the CPU
// backend's attention, softmax and gates call it: the device's twin must give its bits. Every
// 101st float of its finite range (~21 M inputs, each of the 32 table entries and both signs
// many times), and the edges: ±0, ±inf, NaN, the overflow and underflow limits, subnormal
// results.
TEST_F(CudaCpuRoundingTest, ExpIsGlibcsBitForBit) {
  std::vector<float> x = {0.0f,    -0.0f,         INFINITY,      -INFINITY,      NAN,
                          88.0f,   0x1.62e42ep6f, 0x1.62e430p6f, -0x1.9fe368p6f, -0x1.9fe36ap6f,
                          -100.0f, -88.5f,        1e-30f};
  for (uint64_t bits = 0; bits < (uint64_t(1) << 32); bits += 101) {
    const float v = std::bit_cast<float>(uint32_t(bits));
    if (v > -104.0f && v < 89.0f) x.push_back(v);
  }
  const std::vector<float> gpu = device_libm_expf(x);
  size_t differing = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float expected = std::exp(x[i]);
    const bool same = std::isnan(expected)
                          ? std::isnan(gpu[i])
                          : std::bit_cast<uint32_t>(gpu[i]) == std::bit_cast<uint32_t>(expected);
    if (!same && ++differing <= 5) {
      ADD_FAILURE() << "expf(" << x[i] << "): device " << gpu[i] << ", host " << expected;
    }
  }
  EXPECT_EQ(differing, 0u) << "of " << x.size() << " inputs";
}

}  // namespace
}  // namespace sluice::test

#endif  // SLUICE_HAVE_CUDA
