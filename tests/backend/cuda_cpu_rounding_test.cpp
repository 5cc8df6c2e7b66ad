// CudaBackend with CPU rounding (cuda_backend.h cpu_rounding) against the CPU backend: F16
// attention in the CPU's order of operations (cuda_attention_cpu_order.cu) and prefill products
// on the decode kernels. Skips without a CUDA device.
#ifdef SLUICE_HAVE_CUDA

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda_attention_case.h"
#include "core/half.h"
#include "quant/qtype.h"
#include "quant/quantize.h"

namespace sluice::test {
namespace {

class CudaCpuRoundingTest : public CudaAttentionFixture {
 protected:
  void SetUp() override {
    CudaDeviceTest::SetUp();
    if (IsSkipped()) return;
    gpu_ = std::make_unique<cuda::CudaBackend>(0, /*cpu_rounding=*/true);
  }

  // Both backends store the same history (F16 cells) and attend the last chunk. The CPU's
  // operations are reproduced one for one, so the outputs must be identical but where a libm
  // exp / tanh rounds the other way (glibc is within ~0.5 ulp of the correctly rounded result the
  // device computes in double): such a 1-ulp weight can flip one half rounding of the
  // accumulator, so at most 1% of the elements may differ, each by at most 2^-9 of the row's
  // largest |output| (a few half ulps carried on). With a softcap every score goes through
  // glibc's tanhf, which is up to ~2 ulp off the correctly rounded value (half the elements
  // differed on the H200): only the 2^-9 bound holds there.
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
      EXPECT_LE(double(differing), 0.01 * double(out_n));
    }
    EXPECT_LE(worst, 0x1p-9);
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

// A 100-token product runs as decode launches of 8 tokens: bit-equal to 8-token calls of the
// default backend, whatever the chunk (the decode kernels' results do not depend on it).
TEST_F(CudaCpuRoundingTest, ProductsOfLongChunksAreDecodeProducts) {
  const int64_t n_rows = 96, n_cols = 512, n_tokens = 100;
  const auto w = uniform(size_t(n_rows * n_cols), -1.0f, 1.0f);
  const int64_t row_size = int64_t(*row_bytes(QType::Q4_K, uint64_t(n_cols)));
  std::vector<uint8_t> q4k(size_t(n_rows * row_size));
  for (int64_t r = 0; r < n_rows; ++r) {
    quantize_row(QType::Q4_K, w.data() + r * n_cols, q4k.data() + r * row_size, n_cols);
  }
  const auto x = uniform(size_t(n_tokens * n_cols), -2.0f, 2.0f);
  const MatrixView view{QType::Q4_K, q4k.data(), n_cols, n_rows};
  auto dx = upload(x);
  auto rounded = poisoned(size_t(n_tokens * n_rows) * sizeof(float));
  gpu_->matmul(view, dx.as<float>(), rounded.as<float>(), n_tokens);
  cuda::CudaBackend plain(0);
  auto by_eight = poisoned(size_t(n_tokens * n_rows) * sizeof(float));
  for (int64_t t0 = 0; t0 < n_tokens; t0 += 8) {
    plain.matmul(view, dx.as<float>() + t0 * n_cols, by_eight.as<float>() + t0 * n_rows,
                 std::min<int64_t>(8, n_tokens - t0));
  }
  plain.synchronize();
  const auto a = download<float>(rounded, size_t(n_tokens * n_rows));
  const auto b = download<float>(by_eight, size_t(n_tokens * n_rows));
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(ulp_distance(a[i], b[i]), 0) << "element " << i << ", " << where();
  }
}

}  // namespace
}  // namespace sluice::test

#endif  // SLUICE_HAVE_CUDA
