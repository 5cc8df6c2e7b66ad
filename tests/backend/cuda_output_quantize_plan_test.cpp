// OutputQuantizePlan (src/backend/cuda/output_quantize_plan.h), the bookkeeping that lets a decode
// norm or GLU quantize its output for the product that reads it next (a norm here). Plain C++:
// runs without a device (in CI wherever the CUDA backend is compiled). What must hold: nothing
// is fused before a reader has said which format it wants; a reader takes the norm's activations
// only when it is the very next op and reads exactly the norm's rows in that format; a norm whose
// readers disagree is never fused again; the plan never holds more than kMaxProducers.
#include <gtest/gtest.h>

#ifdef SLUICE_HAVE_CUDA

#include <cstdint>

#include "backend/cuda/output_quantize_plan.h"

namespace sluice::cuda {
namespace {

class OutputQuantizePlanTest : public ::testing::Test {
 protected:
  // Host addresses stand in for device ones: the plan only compares them.
  float weight_[4] = {};
  float y_[4] = {};
  float other_[4] = {};
  int quantized_ = 0;
  const OutputQuantizePlan::Producer norm_{weight_, y_, 1, 4096};
  OutputQuantizePlan plan_;
  uint64_t op_ = 0;

  // One decode step's norm and reader (op numbers as the backend gives them): what the reader got.
  const void* step(QType reader_format) {
    const auto format = plan_.format_for(norm_);
    plan_.produced(norm_, format, format ? &quantized_ : nullptr, ++op_);
    return plan_.quantized_input(y_, 1, 4096, reader_format, ++op_);
  }
};

TEST_F(OutputQuantizePlanTest, LearnsTheReadersFormatThenFuses) {
  EXPECT_FALSE(plan_.format_for(norm_).has_value());
  EXPECT_EQ(step(QType::Q8_K), nullptr);  // first step: plain norm, the reader quantizes
  ASSERT_TRUE(plan_.format_for(norm_).has_value());
  EXPECT_EQ(*plan_.format_for(norm_), QType::Q8_K);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(step(QType::Q8_K), &quantized_);
}

TEST_F(OutputQuantizePlanTest, ReadersThatDisagreeEndTheFusion) {
  step(QType::Q8_K);
  EXPECT_EQ(step(QType::Q8_0), nullptr);  // the norm wrote Q8_K: not what this reader reads
  EXPECT_FALSE(plan_.format_for(norm_).has_value());
  EXPECT_EQ(step(QType::Q8_K), nullptr);
  EXPECT_EQ(step(QType::Q8_0), nullptr);
  EXPECT_FALSE(plan_.format_for(norm_).has_value());
}

TEST_F(OutputQuantizePlanTest, OnlyTheNextOpOnTheSameRowsTakesThem) {
  step(QType::Q8_K);
  const auto format = plan_.format_for(norm_);
  ASSERT_TRUE(format.has_value());
  // An op in between (it may have written the rows): the reader quantizes itself.
  plan_.produced(norm_, format, &quantized_, ++op_);
  ++op_;
  EXPECT_EQ(plan_.quantized_input(y_, 1, 4096, QType::Q8_K, ++op_), nullptr);
  // Other rows, another token count, another width: not the norm's output.
  plan_.produced(norm_, format, &quantized_, ++op_);
  EXPECT_EQ(plan_.quantized_input(other_, 1, 4096, QType::Q8_K, op_ + 1), nullptr);
  EXPECT_EQ(plan_.quantized_input(y_, 2, 4096, QType::Q8_K, op_ + 1), nullptr);
  EXPECT_EQ(plan_.quantized_input(y_, 1, 2048, QType::Q8_K, op_ + 1), nullptr);
  EXPECT_EQ(plan_.quantized_input(y_, 1, 4096, QType::Q8_K, op_ + 1), &quantized_);
  // None of those taught the norm anything else.
  EXPECT_EQ(plan_.format_for(norm_), format);
}

TEST_F(OutputQuantizePlanTest, ProducersAreToldApartByInputAndOutput) {
  step(QType::Q8_1);
  float weight2[4] = {};
  const OutputQuantizePlan::Producer next_layer{weight2, y_, 1, 4096};
  EXPECT_FALSE(plan_.format_for(next_layer).has_value());
  plan_.produced(next_layer, std::nullopt, nullptr, ++op_);
  EXPECT_EQ(plan_.quantized_input(y_, 1, 4096, QType::Q8_0, ++op_), nullptr);
  EXPECT_EQ(plan_.format_for(next_layer), QType::Q8_0);
  EXPECT_EQ(plan_.format_for(norm_), QType::Q8_1);
}

TEST_F(OutputQuantizePlanTest, ForgetsEverythingRatherThanGrowWithoutEnd) {
  step(QType::Q8_K);
  ASSERT_TRUE(plan_.format_for(norm_).has_value());
  // Producers of other output rows (new sessions' buffers), each taught once.
  static float rows[OutputQuantizePlan::kMaxProducers];
  for (size_t i = 0; i < OutputQuantizePlan::kMaxProducers; ++i) {
    const OutputQuantizePlan::Producer other{weight_, rows + i, 1, 4096};
    plan_.produced(other, std::nullopt, nullptr, ++op_);
    plan_.quantized_input(rows + i, 1, 4096, QType::Q8_0, ++op_);
  }
  // The map filled up and was cleared once: the first norm learns again from scratch.
  EXPECT_FALSE(plan_.format_for(norm_).has_value());
  const OutputQuantizePlan::Producer last{weight_, rows + OutputQuantizePlan::kMaxProducers - 1, 1,
                                          4096};
  EXPECT_EQ(plan_.format_for(last), QType::Q8_0);
  EXPECT_EQ(step(QType::Q8_K), nullptr);
  EXPECT_EQ(step(QType::Q8_K), &quantized_);
}

}  // namespace
}  // namespace sluice::cuda

#else

TEST(OutputQuantizePlanTest, Skipped) {
  GTEST_SKIP() << "CUDA backend not built (no nvcc at configure time)";
}

#endif
