// The routed experts' kernels (backend/cuda/expert_matmul.h) against the calls they must agree
// with: matmul_by_id bit for bit against quant_matmul.h's matmul of each chosen matrix on its one
// row (every type matmul supports); matmul_grouped bit for bit against matmul of each group of
// more than 8 rows, and every group within the prefill tolerance (2e-3 of sum |w x|: both
// operands rounded to f16 for the tensor cores, as cuda_quant_matmul_test states it) of a
// float64 product of quant/'s dequantized weights; select_experts bit for bit against the host's
// select_top_experts + weigh_chosen_experts (backend/expert_selection.h) on distinct scores.
// Fresh random data every run (the seed is in every failure message), outputs poisoned with NaN
// before each launch. Skips visibly without the CUDA backend or without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend/expert_selection.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"
#include "quant_test_data.h"

#ifdef SLUICE_HAVE_CUDA
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/expert_matmul.h"
#include "backend/cuda/quant_matmul.h"
#include "backend/cuda_select_on_device.h"
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

// Every type quant_matmul.h has kernels for.
std::vector<WeightType> matmul_types() {
  std::vector<WeightType> out;
  for (const QTypeTraits* t = all_qtypes_begin(); t != all_qtypes_end(); ++t) {
    if (cuda::quant_matmul_supported(t->type)) out.push_back({t->type});
  }
  return out;
}

std::string type_name(const testing::TestParamInfo<WeightType>& info) {
  return std::string(qtype_name(info.param.type));
}

constexpr double kPrefillTolerance = 2e-3;

uint32_t clock_seed() {
  return uint32_t(std::chrono::steady_clock::now().time_since_epoch().count());
}

bool device_present() {
  return cuda::device_count() > 0;
}

// Several blocks per row (an odd count where the block allows it).
int64_t columns_for(QType type) {
  const int64_t block = traits_of(type).block_size;
  return block == 1 ? 1000 : block == 32 ? 32 * 13 : 256 * 5;
}

// `count` matrices [n_rows, n_cols] of `type`, matrix i at byte i * stride (stride padded past
// the matrix to 256 bytes, as slot stacks are): the project's quantizer where the type has one,
// random valid blocks otherwise (quant_test_data.h).
struct Stack {
  std::vector<uint8_t> bytes;  // [count, stride]
  int64_t stride = 0, matrix_bytes = 0;
};
Stack make_stack(QType type, int64_t count, int64_t n_rows, int64_t n_cols, std::mt19937& rng) {
  Stack s;
  const int64_t row_size = int64_t(*row_bytes(type, uint64_t(n_cols)));
  s.matrix_bytes = n_rows * row_size;
  s.stride = (s.matrix_bytes + 256 + 255) / 256 * 256;
  s.bytes.assign(size_t(count * s.stride), 0);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(n_cols));  // [n_cols]
  for (int64_t i = 0; i < count; ++i) {
    uint8_t* matrix = s.bytes.data() + i * s.stride;
    if (!quantize_supported(type)) {
      const std::vector<uint8_t> random = random_weight_rows(type, n_rows, n_cols, rng);
      std::copy(random.begin(), random.end(), matrix);
      continue;
    }
    for (int64_t r = 0; r < n_rows; ++r) {
      for (float& v : row) v = value(rng);
      quantize_row(type, row.data(), matrix + r * row_size, n_cols);
    }
  }
  return s;
}

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> out(n);
  for (float& v : out) v = value(rng);
  return out;
}

class CudaExpertMatmul : public testing::TestWithParam<WeightType> {};

// 4 choices (one expert twice) over a stack of 6, the input shared (gate / up) or one per
// choice (down): each output row equals matmul() of the chosen matrix on that one input.
TEST_P(CudaExpertMatmul, ByIdMatchesMatmulOfEachChoice) {
  if (!device_present()) GTEST_SKIP() << "no CUDA device present";
  const QType type = GetParam().type;
  ASSERT_TRUE(cuda::expert_matmul_supported(type));
  const uint32_t seed = clock_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const int64_t count = 6, n_rows = 37, n_cols = columns_for(type), n = 4;
  const Stack stack = make_stack(type, count, n_rows, n_cols, rng);
  const std::vector<int32_t> ids = {5, 1, 5, 0};  // [n]
  cuda::Stream stream;
  cuda::DeviceBuffer w_dev(stack.bytes.size()), ids_dev(ids.size() * sizeof(int32_t));
  cuda::copy_to_device(w_dev.data(), stack.bytes.data(), stack.bytes.size(), stream);
  cuda::copy_to_device(ids_dev.data(), ids.data(), ids.size() * sizeof(int32_t), stream);
  const cuda::ExpertStackArgs args{type, w_dev.data(), stack.stride, n_rows, n_cols};
  for (const bool shared_input : {true, false}) {
    SCOPED_TRACE(shared_input ? "shared input" : "one input per choice");
    const int64_t n_inputs = shared_input ? 1 : n;
    const std::vector<float> x =
        random_floats(size_t(n_inputs * n_cols), rng);  // [n_inputs, n_cols]
    cuda::DeviceBuffer x_dev(x.size() * sizeof(float));
    cuda::DeviceBuffer y_dev(size_t(n * n_rows) * sizeof(float)),
        ref_dev(y_dev.size());  // [n, n_rows]
    cuda::copy_to_device(x_dev.data(), x.data(), x.size() * sizeof(float), stream);
    cuda::fill_bytes(y_dev.data(), 0xff, y_dev.size(), stream);  // NaN poison
    cuda::fill_bytes(ref_dev.data(), 0xff, ref_dev.size(), stream);
    std::string error;
    ASSERT_TRUE(cuda::matmul_by_id(args, ids_dev.as<int32_t>(), n, x_dev.as<float>(), n_inputs,
                                   y_dev.as<float>(), stream.handle(), &error))
        << error;
    for (int64_t c = 0; c < n; ++c) {
      const auto* matrix =
          static_cast<const uint8_t*>(w_dev.data()) + ids[size_t(c)] * stack.stride;
      ASSERT_TRUE(cuda::matmul(type, matrix, n_rows, n_cols,
                               x_dev.as<float>() + (shared_input ? 0 : c * n_cols),
                               ref_dev.as<float>() + c * n_rows, 1, stream.handle(), &error))
          << error;
    }
    const std::vector<float> y = download<float>(y_dev, stream);
    const std::vector<float> ref = download<float>(ref_dev, stream);
    for (int64_t c = 0; c < n; ++c) {
      for (int64_t r = 0; r < n_rows; ++r) {
        const size_t i = size_t(c * n_rows + r);
        ASSERT_TRUE(std::isfinite(y[i])) << "choice " << c << " row " << r;
        ASSERT_EQ(std::memcmp(&y[i], &ref[i], sizeof(float)), 0)
            << "choice " << c << " (expert " << ids[size_t(c)] << ") row " << r << ": " << y[i]
            << " vs matmul's " << ref[i];
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, CudaExpertMatmul, testing::ValuesIn(matmul_types()), type_name);

class CudaExpertGroups : public testing::TestWithParam<WeightType> {};

// Groups of 1, 13, 0 and 70 rows (expert 2 twice) over a stack of 4, in one launch, against the
// float64 products. (Not against matmul: that runs up to 32 rows as decode launches and longer
// chunks through cuBLAS.)
TEST_P(CudaExpertGroups, GroupedMatchesTheReference) {
  if (!device_present()) GTEST_SKIP() << "no CUDA device present";
  const QType type = GetParam().type;
  const uint32_t seed = clock_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const int64_t count = 4, n_rows = 131, n_cols = columns_for(type);
  const Stack stack = make_stack(type, count, n_rows, n_cols, rng);
  const std::vector<int32_t> ids = {2, 0, 3, 2};            // [n_groups]
  const std::vector<int32_t> offsets = {0, 1, 14, 14, 84};  // [n_groups + 1]
  const int64_t n_groups = 4, n_tokens = offsets.back(), max_rows = 70;
  const std::vector<float> x = random_floats(size_t(n_tokens * n_cols), rng);  // [n_tokens, n_cols]
  cuda::Stream stream;
  cuda::DeviceBuffer w_dev(stack.bytes.size()), ids_dev(ids.size() * sizeof(int32_t)),
      offsets_dev(offsets.size() * sizeof(int32_t)), x_dev(x.size() * sizeof(float)),
      y_dev(size_t(n_tokens * n_rows) * sizeof(float));
  cuda::copy_to_device(w_dev.data(), stack.bytes.data(), stack.bytes.size(), stream);
  cuda::copy_to_device(ids_dev.data(), ids.data(), ids.size() * sizeof(int32_t), stream);
  cuda::copy_to_device(offsets_dev.data(), offsets.data(), offsets.size() * sizeof(int32_t),
                       stream);
  cuda::copy_to_device(x_dev.data(), x.data(), x.size() * sizeof(float), stream);
  cuda::fill_bytes(y_dev.data(), 0xff, y_dev.size(), stream);  // NaN poison
  const cuda::ExpertStackArgs args{type, w_dev.data(), stack.stride, n_rows, n_cols};
  std::string error;
  ASSERT_TRUE(cuda::matmul_grouped(args, ids_dev.as<int32_t>(), offsets_dev.as<int32_t>(), n_groups,
                                   max_rows, x_dev.as<float>(), y_dev.as<float>(), stream.handle(),
                                   &error))
      << error;
  const std::vector<float> y = download<float>(y_dev, stream);
  const int64_t row_size = int64_t(*row_bytes(type, uint64_t(n_cols)));
  std::vector<float> w_row(static_cast<size_t>(n_cols));  // [n_cols]
  double worst = 0.0;
  for (int64_t g = 0; g < n_groups; ++g) {
    const int64_t begin = offsets[size_t(g)], end = offsets[size_t(g) + 1];
    const uint8_t* matrix = stack.bytes.data() + ids[size_t(g)] * stack.stride;
    for (int64_t r = 0; r < n_rows; ++r) {
      dequantize_row(type, matrix + r * row_size, w_row.data(), n_cols);
      for (int64_t t = begin; t < end; ++t) {
        double exact = 0.0, magnitude = 0.0;
        for (int64_t c = 0; c < n_cols; ++c) {
          const double product = double(w_row[size_t(c)]) * double(x[size_t(t * n_cols + c)]);
          exact += product;
          magnitude += std::fabs(product);
        }
        const float got = y[size_t(t * n_rows + r)];
        ASSERT_TRUE(std::isfinite(got)) << "group " << g << " token " << t << " row " << r;
        const double relative = std::fabs(double(got) - exact) / magnitude;
        worst = std::max(worst, relative);
        ASSERT_LE(relative, kPrefillTolerance)
            << "group " << g << " token " << t << " row " << r << ": " << got << " vs " << exact;
      }
    }
  }
  std::cout << "[ cuda     ] " << qtype_name(type) << ": grouped worst relative error " << worst
            << "\n";
}

INSTANTIATE_TEST_SUITE_P(SomeTypes, CudaExpertGroups,
                         testing::Values(WeightType{QType::F16}, WeightType{QType::BF16},
                                         WeightType{QType::Q8_0}, WeightType{QType::Q4_K},
                                         WeightType{QType::Q6_K}, WeightType{QType::IQ4_XS},
                                         WeightType{QType::MXFP4}, WeightType{QType::IQ2_XXS}),
                         type_name);

// Router probabilities of n_tokens tokens: the softmax of random logits, redrawn until the
// token's scores (probs + bias, as the selection adds them in float) are distinct, where the
// host's std::sort and the device's index tie-break could differ.
std::vector<float> random_probs(int64_t n_tokens, int64_t n_expert, const std::vector<float>& bias,
                                std::mt19937& rng) {
  std::normal_distribution<double> logit(0.0, 2.0);
  std::vector<float> probs(size_t(n_tokens * n_expert));  // [n_tokens, n_expert]
  std::vector<double> e(static_cast<size_t>(n_expert));
  for (int64_t t = 0; t < n_tokens; ++t) {
    float* p = probs.data() + t * n_expert;
    for (bool distinct = false; !distinct;) {
      double sum = 0.0;
      for (double& v : e) sum += (v = std::exp(logit(rng)));
      std::set<float> scores;
      for (int64_t i = 0; i < n_expert; ++i) {
        p[i] = float(e[size_t(i)] / sum);
        scores.insert(p[i] + (bias.empty() ? 0.0f : bias[size_t(i)]));
      }
      distinct = int64_t(scores.size()) == n_expert;
    }
  }
  return probs;
}

struct SelectionCase {
  const char* name;
  ExpertSelection config;
  bool with_bias;
};

void expect_selection_matches_host(const SelectionCase& test, uint32_t seed) {
  SCOPED_TRACE(std::string(test.name) + ", seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const ExpertSelection& s = test.config;
  const int64_t n_tokens = 7, n_expert = s.n_expert, k = s.n_expert_used;
  std::vector<float> bias;  // [n_expert] or empty
  if (test.with_bias) {
    std::uniform_real_distribution<float> value(-0.05f, 0.05f);
    bias.resize(size_t(n_expert));
    for (float& b : bias) b = value(rng);
  }
  const std::vector<float> probs = random_probs(n_tokens, n_expert, bias, rng);
  std::vector<int32_t> host_selected(size_t(n_tokens * k));  // [n_tokens, k]
  std::vector<float> host_weights(host_selected.size());     // [n_tokens, k]
  SelectionScratch scratch;
  for (int64_t t = 0; t < n_tokens; ++t) {
    select_top_experts(probs.data() + t * n_expert, bias.empty() ? nullptr : bias.data(), s,
                       scratch, host_selected.data() + t * k);
    weigh_chosen_experts(probs.data() + t * n_expert, host_selected.data() + t * k, s, false,
                         host_weights.data() + t * k);
  }
  DeviceChoices device;
  ASSERT_NO_FATAL_FAILURE(select_on_device(probs, bias, n_tokens, s, device));
  const std::vector<int32_t>& selected = device.selected;
  const std::vector<float>& weights = device.weights;
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t c = 0; c < k; ++c) {
      const size_t i = size_t(t * k + c);
      ASSERT_EQ(selected[i], host_selected[i]) << "token " << t << " choice " << c;
      ASSERT_EQ(std::memcmp(&weights[i], &host_weights[i], sizeof(float)), 0)
          << "token " << t << " choice " << c << ": " << weights[i] << " vs " << host_weights[i];
    }
  }
}

TEST(CudaSelectExperts, MatchesHostSelection) {
  if (!device_present()) GTEST_SKIP() << "no CUDA device present";
  const uint32_t seed = clock_seed();
  // Qwen3 style: 128 experts, 8 used, normalised weights.
  expect_selection_matches_host({"qwen3", {128, 8, 0, 0, true, 0.0f}, false}, seed);
  // DeepSeek V3 style: selection bias, 8 groups of 32 with 4 eligible, normalised and scaled.
  expect_selection_matches_host({"deepseek3", {256, 8, 8, 4, true, 2.5f}, true}, seed + 1);
  // Small and plain: 32 experts, 4 used, the raw probabilities as weights.
  expect_selection_matches_host({"plain", {32, 4, 0, 0, false, 0.0f}, false}, seed + 2);
}

#endif

// Bad calls are refused on the host with a one-line message before any device work (so these
// run without a device too).
TEST(CudaExpertInput, RefusesBadShapes) {
#ifndef SLUICE_HAVE_CUDA
  GTEST_SKIP() << "CUDA backend not built (no nvcc at configure time)";
#else
  alignas(256) static float dummy[1024];
  auto* ids = reinterpret_cast<int32_t*>(dummy);
  std::string error;
  const auto expect_refused = [&](bool result, const char* word) {
    EXPECT_FALSE(result);
    EXPECT_NE(error.find(word), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    error.clear();
  };
  ExpertSelection s{2000, 8, 0, 0, true, 0.0f};
  expect_refused(cuda::select_experts(dummy, nullptr, 1, s, ids, dummy, nullptr, &error),
                 "n_expert");
  s = {128, 33, 0, 0, true, 0.0f};
  expect_refused(cuda::select_experts(dummy, nullptr, 1, s, ids, dummy, nullptr, &error),
                 "n_expert_used");
  s = {128, 0, 0, 0, true, 0.0f};
  expect_refused(cuda::select_experts(dummy, nullptr, 1, s, ids, dummy, nullptr, &error),
                 "n_expert_used");
  s = {128, 8, 8, 9, true, 0.0f};
  expect_refused(cuda::select_experts(dummy, nullptr, 1, s, ids, dummy, nullptr, &error), "groups");
  s = {128, 8, 128, 4, true, 0.0f};  // groups of one expert: no second best
  expect_refused(cuda::select_experts(dummy, nullptr, 1, s, ids, dummy, nullptr, &error), "groups");

  const int64_t row_size = int64_t(*row_bytes(QType::Q4_K, 256));
  cuda::ExpertStackArgs stack{QType::Q4_K, dummy, 4 * row_size, 4, 256};
  expect_refused(cuda::matmul_by_id(stack, ids, -1, dummy, 1, dummy, nullptr, &error), "choices");
  expect_refused(cuda::matmul_by_id(stack, ids, 4, dummy, 2, dummy, nullptr, &error), "input rows");
  cuda::ExpertStackArgs bad = stack;
  bad.type = QType::TQ1_0;
  expect_refused(cuda::matmul_by_id(bad, ids, 4, dummy, 1, dummy, nullptr, &error),
                 "not supported");
  EXPECT_FALSE(cuda::expert_matmul_supported(QType::TQ1_0));
  bad = stack;
  bad.n_cols = 128;
  expect_refused(cuda::matmul_by_id(bad, ids, 4, dummy, 1, dummy, nullptr, &error), "n_cols");
  bad = stack;
  bad.stride = 4 * row_size + 8;  // Q4_K blocks need 16-byte alignment
  expect_refused(cuda::matmul_by_id(bad, ids, 4, dummy, 1, dummy, nullptr, &error), "stride");
  bad = stack;
  bad.stride = 3 * row_size;  // smaller than a matrix
  expect_refused(cuda::matmul_by_id(bad, ids, 4, dummy, 1, dummy, nullptr, &error), "stride");
  expect_refused(cuda::matmul_by_id(stack, ids, 4, dummy + 1, 1, dummy, nullptr, &error),
                 "aligned");
  expect_refused(cuda::matmul_grouped(stack, ids, ids, 70000, 8, dummy, dummy, nullptr, &error),
                 "groups");
  expect_refused(cuda::matmul_grouped(stack, nullptr, ids, 2, 8, dummy, dummy, nullptr, &error),
                 "missing");
  for (const WeightType& weight : matmul_types()) {
    EXPECT_TRUE(cuda::expert_matmul_supported(weight.type)) << qtype_name(weight.type);
  }
#endif
}

}  // namespace
}  // namespace sluice::test
