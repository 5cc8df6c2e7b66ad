// The CUDA quantized products and row lookups (backend/cuda/quant_matmul.h) against the CPU
// reference dequantization (quant/dequantize.h) times the activations, summed in float64.
// Fresh random data every run (the seed is in every failure message), outputs poisoned with NaN
// before each launch. Skips visibly without the CUDA backend or without a device.
//
// Tolerances, relative to sum_c |w_rc x_tc| of the output:
//   decode (n_tokens <= 32: launches of up to 8), 1e-5: weights dequantized in float registers as
//   the reference does
//     (up to a fused multiply-add in the types with a minimum), float accumulation of at most a
//     few hundred terms per thread plus a 7-level tree: bounded by ~(n_cols/128 + 10) * 2^-24.
//   decode of the quantized types (all but F32/F16/BF16; quant_int8_matvec.cuh and
//     quant_int8_pieces.cuh), 1e-5, but against the activations quantized as the CPU backend
//     does (Q8_K, Q8_0 or Q8_1: activation_type_for): the reference is sum_c w_rc * xq_tc in
//     float64, xq the dequantized activations, and the magnitude sum_c |w_rc xq_tc|. Integer sums
//     inside a block are exact; per 32 elements a lane rounds d * dx, the scale products and the
//     partial sum (a few ulp of terms bounded by the magnitude), then float sums over n_cols/256
//     blocks and a 5-level tree: far below 1e-5. The CPU's own dot product (quant/dot_reference.h,
//     the same Q8_K activations) must meet the same bound, which pins the device's activation
//     quantization to the CPU's: one element rounded differently moves the result by ~|w|/127, well
//     over 1e-5 of these sums.
//   prefill (n_tokens > 32: cuBLAS, or the tiles without it), 2e-3: both operands rounded to f16
//   for
//     the tensor cores, each product off by at most (1 + 2^-11)^2 - 1 ~ 9.8e-4 of itself (f16
//     subnormals aside, far below the test's weight scales), then float accumulation; 2e-3
//     leaves room for the sums.
//   get_rows: bit-exact (the same float operations as the reference, no contraction).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "quant/blocks.h"
#include "quant/dequantize.h"
#include "quant/dot_reference.h"
#include "quant/quantize.h"
#include "quant_test_data.h"

#ifdef SLUICE_HAVE_CUDA
#include "backend/cpu/activation_quantize.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/quant_matmul.h"
#endif

namespace sluice::test {
namespace {

#ifdef SLUICE_HAVE_CUDA

struct WeightType {
  QType type;
  friend void PrintTo(const WeightType& weight, std::ostream* out) {
    *out << qtype_name(weight.type);
  }
};

std::vector<WeightType> cuda_weight_types() {
  const QType types[] = {QType::F32,    QType::F16,     QType::BF16,   QType::Q8_0,    QType::Q4_0,
                         QType::Q4_1,   QType::Q5_0,    QType::Q5_1,   QType::IQ4_NL,  QType::MXFP4,
                         QType::Q2_K,   QType::Q3_K,    QType::Q4_K,   QType::Q5_K,    QType::Q6_K,
                         QType::IQ4_XS, QType::IQ2_XXS, QType::IQ2_XS, QType::IQ3_XXS, QType::IQ2_S,
                         QType::IQ3_S,  QType::IQ1_S,   QType::IQ1_M};
  std::vector<WeightType> out;
  for (QType type : types) out.push_back({type});
  return out;
}

std::string type_name(const testing::TestParamInfo<WeightType>& info) {
  return std::string(qtype_name(info.param.type));
}

constexpr double kDecodeTolerance = 1e-5;
constexpr double kPrefillTolerance = 2e-3;
// Chunks of up to 32 tokens run as decode launches of up to 8 (quant_matmul.cu).
constexpr int64_t kMaxDecodeTokens = 32;

uint32_t clock_seed() {
  return uint32_t(std::chrono::steady_clock::now().time_since_epoch().count());
}

// Weight rows made by the project's quantizer when the type has one (realistic blocks), random
// valid bytes with moderate scales otherwise (quant_test_data.h).
std::vector<uint8_t> make_weights(QType type, int64_t n_rows, int64_t n_cols, std::mt19937& rng) {
  if (!quantize_supported(type)) return random_weight_rows(type, n_rows, n_cols, rng);
  const uint64_t row_size = *row_bytes(type, uint64_t(n_cols));
  std::vector<uint8_t> bytes(size_t(n_rows) * row_size);  // [n_rows, row_size]
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(n_cols));  // [n_cols]
  for (int64_t r = 0; r < n_rows; ++r) {
    for (float& v : row) v = value(rng);
    quantize_row(type, row.data(), bytes.data() + r * row_size, n_cols);
  }
  return bytes;
}

std::vector<float> dequantize_rows(QType type, const std::vector<uint8_t>& bytes, int64_t n_rows,
                                   int64_t n_cols) {
  const uint64_t row_size = *row_bytes(type, uint64_t(n_cols));
  std::vector<float> out(size_t(n_rows * n_cols));  // [n_rows, n_cols]
  for (int64_t r = 0; r < n_rows; ++r) {
    dequantize_row(type, bytes.data() + r * row_size, out.data() + r * n_cols, n_cols);
  }
  return out;
}

// Weight types whose decode multiplies int8 activations (quant_int8_matvec.cuh, has_int8_matvec),
// quantized to the type the CPU pairs them with (activation_type_for: Q8_K, Q8_0 or Q8_1).
bool decodes_with_int8(QType type) {
  return type != QType::F32 && type != QType::F16 && type != QType::BF16;
}

// One token's activations quantized as the CPU backend does (Q8_0 / Q8_1 with ggml's x86
// arithmetic, backend/cpu/activation_quantize.h) and their dequantized values.
struct QuantizedActivations {
  std::vector<uint8_t> blocks;
  std::vector<float> values;  // [n_cols]
};
QuantizedActivations quantize_activations(QType weight_type, const float* x, int64_t n_cols) {
  const QType type = *activation_type_for(weight_type);
  QuantizedActivations out;
  out.blocks.resize(*row_bytes(type, uint64_t(n_cols)));
  cpu::activation_quantizer(type)(x, out.blocks.data(), n_cols);
  out.values.resize(size_t(n_cols));
  dequantize_row(type, out.blocks.data(), out.values.data(), n_cols);
  return out;
}

// Q4_1 / Q5_1 pair with Q8_1, whose dot product takes the minimum's activation sum from the
// block's stored s = f16(d * sum q) (quant/dot_reference.cpp), not from the dequantized values:
// that rounding (up to 2^-11 of the minimum's term) is part of what the CPU computes, so the
// reference takes it too. Returns sum_b m_b * (s_b - sum of block b's dequantized activations).
double q8_1_minimum_correction(QType type, const uint8_t* w_row, const QuantizedActivations& xq,
                               int64_t n_cols) {
  if (type != QType::Q4_1 && type != QType::Q5_1) return 0.0;
  const size_t w_block = traits_of(type).block_bytes;
  double correction = 0.0;
  for (int64_t b = 0; b < n_cols / 32; ++b) {
    uint16_t m_bits = 0;  // BlockQ4_1 / BlockQ5_1: d, then m
    std::memcpy(&m_bits, w_row + size_t(b) * w_block + 2, sizeof(m_bits));
    BlockQ8_1 x_block;
    std::memcpy(&x_block, xq.blocks.data() + size_t(b) * sizeof(BlockQ8_1), sizeof(x_block));
    double sum = 0.0;
    for (int64_t c = 32 * b; c < 32 * b + 32; ++c) sum += double(xq.values[size_t(c)]);
    correction += double(fp16_to_fp32(m_bits)) * (double(fp16_to_fp32(x_block.s)) - sum);
  }
  return correction;
}

// Column counts: one block, several blocks (an odd count), a wider row.
std::vector<int64_t> column_counts(QType type) {
  const int64_t block = traits_of(type).block_size;
  if (block == 1) return {8, 1000};
  if (block == 32) return {32, 32 * 13, 2048};
  return {256, 256 * 5};
}

bool device_present() {
  return cuda::device_count() > 0;
}

class CudaQuantMatmul : public testing::TestWithParam<WeightType> {};

TEST_P(CudaQuantMatmul, MatchesReferenceForEveryTokenCount) {
  if (!device_present()) GTEST_SKIP() << "no CUDA device present";
  const QType type = GetParam().type;
  const uint32_t seed = clock_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  const int64_t row_counts[] = {37, 131};
  double worst[2] = {0.0, 0.0};  // decode, prefill
  for (const int64_t n_cols : column_counts(type)) {
    for (const int64_t n_rows : row_counts) {
      const std::vector<uint8_t> w = make_weights(type, n_rows, n_cols, rng);
      const std::vector<float> wf = dequantize_rows(type, w, n_rows, n_cols);
      cuda::Stream stream;
      cuda::DeviceBuffer w_dev(w.size());
      cuda::copy_to_device(w_dev.data(), w.data(), w.size(), stream);
      for (const int64_t n_tokens : {1, 3, 8, 9, 20, 64, 130}) {
        SCOPED_TRACE(std::to_string(n_rows) + " x " + std::to_string(n_cols) + ", " +
                     std::to_string(n_tokens) + " tokens");
        std::vector<float> x(size_t(n_tokens * n_cols));  // [n_tokens, n_cols]
        for (float& v : x) v = value(rng);
        std::vector<float> y(size_t(n_tokens * n_rows));  // [n_tokens, n_rows]
        cuda::DeviceBuffer x_dev(x.size() * sizeof(float)), y_dev(y.size() * sizeof(float));
        cuda::copy_to_device(x_dev.data(), x.data(), x.size() * sizeof(float), stream);
        cuda::fill_bytes(y_dev.data(), 0xff, y.size() * sizeof(float), stream);  // NaN poison
        std::string error;
        ASSERT_TRUE(cuda::matmul(type, w_dev.data(), n_rows, n_cols, x_dev.as<float>(),
                                 y_dev.as<float>(), n_tokens, stream.handle(), &error))
            << error;
        cuda::copy_to_host(y.data(), y_dev.data(), y.size() * sizeof(float), stream);
        stream.synchronize();
        const bool decode = n_tokens <= kMaxDecodeTokens;
        const bool int8_decode = decode && decodes_with_int8(type);
        const double tolerance = decode ? kDecodeTolerance : kPrefillTolerance;
        const uint64_t w_row_size = *row_bytes(type, uint64_t(n_cols));
        for (int64_t t = 0; t < n_tokens; ++t) {
          QuantizedActivations xq;
          if (int8_decode) xq = quantize_activations(type, x.data() + t * n_cols, n_cols);
          const float* xt = int8_decode ? xq.values.data() : x.data() + t * n_cols;
          for (int64_t r = 0; r < n_rows; ++r) {
            double exact = 0.0, magnitude = 0.0;
            for (int64_t c = 0; c < n_cols; ++c) {
              const double product = double(wf[size_t(r * n_cols + c)]) * double(xt[c]);
              exact += product;
              magnitude += std::fabs(product);
            }
            if (int8_decode) {
              exact += q8_1_minimum_correction(type, w.data() + r * w_row_size, xq, n_cols);
            }
            const float got = y[size_t(t * n_rows + r)];
            ASSERT_TRUE(std::isfinite(got)) << "token " << t << " row " << r;
            const double relative = std::fabs(double(got) - exact) / magnitude;
            worst[decode ? 0 : 1] = std::max(worst[decode ? 0 : 1], relative);
            ASSERT_LE(relative, tolerance)
                << "token " << t << " row " << r << ": " << got << " vs " << exact;
            if (int8_decode) {
              const float cpu =
                  vec_dot_reference(type, w.data() + r * w_row_size, xq.blocks.data(), n_cols);
              ASSERT_LE(std::fabs(double(cpu) - exact) / magnitude, tolerance)
                  << "CPU reference, token " << t << " row " << r;
            }
          }
        }
      }
    }
  }
  std::cout << "[ cuda     ] " << qtype_name(type) << ": worst relative error decode " << worst[0]
            << ", prefill " << worst[1] << "\n";
}

TEST_P(CudaQuantMatmul, GetRowsIsBitExact) {
  if (!device_present()) GTEST_SKIP() << "no CUDA device present";
  const QType type = GetParam().type;
  const uint32_t seed = clock_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (const int64_t n_cols : column_counts(type)) {
    const int64_t n_rows = 19, n_ids = 41;
    // Random bytes exercise every bit pattern of the blocks, not just what a quantizer writes.
    const std::vector<uint8_t> table = random_weight_rows(type, n_rows, n_cols, rng);
    const std::vector<float> expected_rows = dequantize_rows(type, table, n_rows, n_cols);
    std::vector<int32_t> ids(static_cast<size_t>(n_ids));  // [n_ids], repeats allowed
    for (int32_t& id : ids) id = int32_t(rng() % uint32_t(n_rows));
    cuda::Stream stream;
    cuda::DeviceBuffer table_dev(table.size()), ids_dev(ids.size() * sizeof(int32_t)),
        out_dev(size_t(n_ids * n_cols) * sizeof(float));
    cuda::copy_to_device(table_dev.data(), table.data(), table.size(), stream);
    cuda::copy_to_device(ids_dev.data(), ids.data(), ids.size() * sizeof(int32_t), stream);
    cuda::fill_bytes(out_dev.data(), 0xff, out_dev.size(), stream);  // NaN poison
    std::string error;
    ASSERT_TRUE(cuda::get_rows(type, table_dev.data(), n_cols, ids_dev.as<int32_t>(), n_ids,
                               out_dev.as<float>(), stream.handle(), &error))
        << error;
    std::vector<float> out(size_t(n_ids * n_cols));  // [n_ids, n_cols]
    cuda::copy_to_host(out.data(), out_dev.data(), out.size() * sizeof(float), stream);
    stream.synchronize();
    for (int64_t i = 0; i < n_ids; ++i) {
      const float* expected = expected_rows.data() + int64_t(ids[size_t(i)]) * n_cols;
      ASSERT_EQ(std::memcmp(out.data() + i * n_cols, expected, size_t(n_cols) * sizeof(float)), 0)
          << "id " << i << " (row " << ids[size_t(i)] << "), " << n_cols << " columns";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, CudaQuantMatmul, testing::ValuesIn(cuda_weight_types()),
                         type_name);

// Bad calls are refused on the host with a message, before any device work.
// matmul_quantized over activations quantized once gives matmul's output bit for bit, and one
// quantization serves every type with the same activation format (Q4_K's Q8_K for Q6_K / IQ2_XXS).
TEST_P(CudaQuantMatmul, SharedQuantizedActivationsMatchMatmul) {
  if (!device_present()) GTEST_SKIP() << "no CUDA device present";
  const QType type = GetParam().type;
  if (!cuda::quantized_decode_supported(type)) {
    std::string error;
    alignas(16) static float dummy[64];
    EXPECT_FALSE(cuda::quantize_activations(type, dummy, 8, 1, dummy, nullptr, &error));
    EXPECT_NE(error.find("no quantized decode"), std::string::npos) << error;
    return;
  }
  const uint32_t seed = clock_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  const int64_t n_rows = 37, n_cols = column_counts(type).back();
  const QType shares_with = traits_of(type).block_size == 256 ? QType::Q4_K : type;
  const std::vector<uint8_t> w = make_weights(type, n_rows, n_cols, rng);
  cuda::Stream stream;
  cuda::DeviceBuffer w_dev(w.size());
  cuda::copy_to_device(w_dev.data(), w.data(), w.size(), stream);
  for (const int64_t n_tokens : {1, 3, 8}) {
    std::vector<float> x(size_t(n_tokens * n_cols));
    for (float& v : x) v = value(rng);
    cuda::DeviceBuffer x_dev(x.size() * sizeof(float));
    cuda::copy_to_device(x_dev.data(), x.data(), x.size() * sizeof(float), stream);
    const int64_t xq_bytes = cuda::quantized_activation_bytes(shares_with, n_cols, n_tokens);
    ASSERT_EQ(xq_bytes, cuda::quantized_activation_bytes(type, n_cols, n_tokens));
    cuda::DeviceBuffer xq_dev{size_t(xq_bytes)};
    cuda::DeviceBuffer y1(size_t(n_tokens * n_rows) * sizeof(float)), y2(y1.size());
    cuda::fill_bytes(y2.data(), 0xff, y2.size(), stream);
    std::string error;
    ASSERT_TRUE(cuda::matmul(type, w_dev.data(), n_rows, n_cols, x_dev.as<float>(), y1.as<float>(),
                             n_tokens, stream.handle(), &error))
        << error;
    ASSERT_TRUE(cuda::quantize_activations(shares_with, x_dev.as<float>(), n_cols, n_tokens,
                                           xq_dev.data(), stream.handle(), &error))
        << error;
    ASSERT_TRUE(cuda::matmul_quantized(type, w_dev.data(), n_rows, n_cols, xq_dev.data(),
                                       y2.as<float>(), n_tokens, stream.handle(), &error))
        << error;
    std::vector<float> h1(size_t(n_tokens * n_rows)), h2(h1.size());
    cuda::copy_to_host(h1.data(), y1.data(), y1.size(), stream);
    cuda::copy_to_host(h2.data(), y2.data(), y2.size(), stream);
    stream.synchronize();
    ASSERT_EQ(std::memcmp(h1.data(), h2.data(), y1.size()), 0) << n_tokens << " tokens";
  }
  std::string error;
  EXPECT_FALSE(cuda::matmul_quantized(type, w_dev.data(), n_rows, n_cols, w_dev.data(), nullptr, 9,
                                      stream.handle(), &error));
  EXPECT_NE(error.find("tokens"), std::string::npos) << error;
}

TEST(CudaQuantMatmulInput, RefusesBadShapesAndTypes) {
  std::string error;
  alignas(16) static float dummy[64];
  EXPECT_FALSE(cuda::quant_matmul_supported(QType::TQ1_0));
  EXPECT_FALSE(cuda::matmul(QType::TQ1_0, dummy, 1, 256, dummy, dummy, 1, nullptr, &error));
  EXPECT_NE(error.find("not supported"), std::string::npos) << error;
  EXPECT_FALSE(cuda::matmul(QType::Q4_K, dummy, 1, 128, dummy, dummy, 1, nullptr, &error));
  EXPECT_NE(error.find("n_cols"), std::string::npos) << error;
  EXPECT_FALSE(cuda::matmul(QType::F16, dummy, 1, 12, dummy, dummy, 1, nullptr, &error));
  EXPECT_NE(error.find("n_cols"), std::string::npos) << error;
  EXPECT_FALSE(cuda::get_rows(QType::Q4_K, reinterpret_cast<char*>(dummy) + 4, 256, nullptr, 1,
                              dummy, nullptr, &error));
  EXPECT_NE(error.find("aligned"), std::string::npos) << error;
  for (const WeightType& weight : cuda_weight_types()) {
    EXPECT_TRUE(cuda::quant_matmul_supported(weight.type)) << qtype_name(weight.type);
  }
}

#else

TEST(CudaQuantMatmul, NeedsTheCudaBackend) {
  GTEST_SKIP() << "CUDA backend not built (no nvcc at configure time)";
}

#endif

}  // namespace
}  // namespace sluice::test
