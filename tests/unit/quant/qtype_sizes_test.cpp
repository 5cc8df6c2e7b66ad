// The QType table against the block sizes gguf-py 0.19 publishes (GGML_QUANT_SIZES), and
// row_bytes. The expected list is copied here so a change to either side shows up as a diff.
#include <gtest/gtest.h>

#include <cstdint>

#include "quant/qtype.h"

namespace sluice {
namespace {

struct Expected {
  uint32_t id;
  const char* name;
  uint32_t block_size, block_bytes;
};

// gguf.constants.GGML_QUANT_SIZES (0.19.0), except Q8_1: gguf-py says 40 bytes, but ggml's
// block_q8_1 is two halves and 32 int8 (36), which is what every ggml build reads and writes.
constexpr Expected kGgufSizes[] = {
    {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},
    {3, "Q4_1", 32, 20},      {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 36},      {10, "Q2_K", 256, 84},
    {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66},
    {17, "IQ2_XS", 256, 74},  {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},  {22, "IQ2_S", 256, 82},
    {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},
    {26, "I32", 1, 4},        {27, "I64", 1, 8},        {28, "F64", 1, 8},
    {29, "IQ1_M", 256, 56},   {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},
    {35, "TQ2_0", 256, 66},   {39, "MXFP4", 32, 17},    {40, "NVFP4", 64, 36},
    {41, "Q1_0", 128, 18},
};

TEST(QuantTypeSizes, MatchGgufQuantSizes) {
  for (const auto& e : kGgufSizes) {
    SCOPED_TRACE(e.name);
    const auto traits = qtype_traits(e.id);
    ASSERT_TRUE(traits.has_value());
    EXPECT_EQ(traits->name, e.name);
    EXPECT_EQ(traits->block_size, e.block_size);
    EXPECT_EQ(traits->block_bytes, e.block_bytes);
    EXPECT_TRUE(traits->in_gguf);
  }
}

TEST(QuantTypeSizes, EveryGgufTypeIsListed) {
  int in_gguf = 0;
  for (auto* t = all_qtypes_begin(); t != all_qtypes_end(); ++t) in_gguf += t->in_gguf ? 1 : 0;
  EXPECT_EQ(in_gguf, int(std::size(kGgufSizes)));
}

TEST(QuantTypeSizes, RowBytes) {
  EXPECT_EQ(row_bytes(QType::Q4_0, 4096), 4096u / 32 * 18);
  EXPECT_EQ(row_bytes(QType::Q4_K, 4096), 16u * 144);
  EXPECT_EQ(row_bytes(QType::MXFP4, 2880), 90u * 17);
  EXPECT_EQ(row_bytes(QType::NVFP4, 4096), 64u * 36);
  EXPECT_EQ(row_bytes(QType::Q1_0, 4096), 32u * 18);
  EXPECT_FALSE(row_bytes(QType::NVFP4, 32).has_value());
  EXPECT_EQ(row_bytes(QType::F16, 7), 14u);
  EXPECT_EQ(row_bytes(QType::F8_E4M3, 7), 7u);
  EXPECT_EQ(row_bytes(QType::Q8_0, 0), 0u);
  EXPECT_FALSE(row_bytes(QType::Q4_K, 4000).has_value());
  EXPECT_FALSE(row_bytes(QType::Q8_0, 33).has_value());
}

}  // namespace
}  // namespace sluice
