// Hand-checked cases of the dequantizers and the IQ tables (the byte-level parity with gguf-py
// over random blocks lives in tests/e2e/test_quant_parity.py): every type has a kernel, bad
// lengths fail, FP8 decoding and block scaling, and spot values of the generated grids.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/half.h"
#include "quant/blocks.h"
#include "quant/dequantize.h"
#include "quant/float_formats.h"
#include "quant/iq_tables.h"
#include "sluice/error.h"

namespace sluice {
namespace {

TEST(Dequantize, EveryTypeHasAKernel) {
  for (auto* t = all_qtypes_begin(); t != all_qtypes_end(); ++t) {
    EXPECT_NE(dequantizer_of(t->type), nullptr) << t->name;
  }
}

TEST(Dequantize, RejectsPartialBlocks) {
  BlockQ4_0 b{};
  float out[64];
  EXPECT_THROW(dequantize_row(QType::Q4_0, &b, out, 31), Error);
  EXPECT_NO_THROW(dequantize_row(QType::Q4_0, &b, out, 0));
}

TEST(Dequantize, LegacyQ4ByHand) {
  BlockQ4_0 b{};
  b.d = fp32_to_fp16(0.5f);
  b.qs[0] = 0xf0;  // element 0: 0 - 8, element 16: 15 - 8
  b.qs[1] = 0x88;
  float y[32];
  dequantize_row(QType::Q4_0, &b, y, 32);
  EXPECT_EQ(y[0], -4.0f);
  EXPECT_EQ(y[16], 3.5f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], -4.0f);  // qs[2] = 0: 0 - 8
}

TEST(Dequantize, Fp8Codes) {
  EXPECT_EQ(fp8_e4m3_to_fp32(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_fp32(0x01), 0x1p-9f);
  EXPECT_EQ(fp8_e4m3_to_fp32(0x38), 1.0f);
  EXPECT_EQ(fp8_e4m3_to_fp32(0xb8), -1.0f);
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_fp32(0x7f)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_fp32(0xff)));
  EXPECT_EQ(fp8_e5m2_to_fp32(0x3c), 1.0f);
  EXPECT_EQ(fp8_e5m2_to_fp32(0x7b), 57344.0f);
  EXPECT_TRUE(std::isinf(fp8_e5m2_to_fp32(0x7c)));
}

TEST(Dequantize, E8m0Half) {
  EXPECT_EQ(e8m0_to_fp32_half(127), 0.5f);
  EXPECT_EQ(e8m0_to_fp32_half(128), 1.0f);
  EXPECT_EQ(e8m0_to_fp32_half(1), 0x1p-127f);
  EXPECT_EQ(e8m0_to_fp32_half(0), 0x1p-128f);
  EXPECT_EQ(e8m0_to_fp32_half(254), 0x1p126f);
}

TEST(Dequantize, Ue4m3Half) {
  EXPECT_EQ(ue4m3_to_fp32_half(0x38), 0.5f);      // exponent 7, mantissa 0: 1.0, halved
  EXPECT_EQ(ue4m3_to_fp32_half(0x3c), 0.75f);     // 1.5, halved
  EXPECT_EQ(ue4m3_to_fp32_half(0x01), 0x1p-10f);  // smallest subnormal 2^-9, halved
  EXPECT_EQ(ue4m3_to_fp32_half(0x7e), 224.0f);    // largest finite 448, halved
  EXPECT_EQ(ue4m3_to_fp32_half(0x7f), 0.0f);      // the NaN code reads as zero
  EXPECT_EQ(ue4m3_to_fp32_half(0x00), 0.0f);
  EXPECT_EQ(ue4m3_to_fp32_half(0xff), 240.0f);  // bit 7 ignored: exponent 15, mantissa 7
}

TEST(Dequantize, Nvfp4ByHand) {
  BlockNVFP4 b{};
  b.d[0] = 0x38;    // 0.5: kValuesMxfp4 is doubled, so element values are the true E2M1 values
  b.d[3] = 0x40;    // 1.0
  b.qs[0] = 0xa7;   // element 0: code 7 (12 -> 6), element 8: code 10 (-2 -> -1)
  b.qs[31] = 0x1f;  // sub-block 3, j = 7: element 55 code 15 (-12 -> -12), element 63 code 1
  float y[64];
  dequantize_row(QType::NVFP4, &b, y, 64);
  EXPECT_EQ(y[0], 6.0f);
  EXPECT_EQ(y[8], -1.0f);
  EXPECT_EQ(y[55], -12.0f);
  EXPECT_EQ(y[63], 1.0f);
  EXPECT_EQ(y[16], 0.0f);  // sub-block 1 has scale 0
}

TEST(Dequantize, Q1_0ByHand) {
  BlockQ1_0 b{};
  b.d = fp32_to_fp16(0.25f);
  b.qs[0] = 0x01;   // element 0 set
  b.qs[15] = 0x80;  // element 127 set
  float y[128];
  dequantize_row(QType::Q1_0, &b, y, 128);
  EXPECT_EQ(y[0], 0.25f);
  EXPECT_EQ(y[1], -0.25f);
  EXPECT_EQ(y[126], -0.25f);
  EXPECT_EQ(y[127], 0.25f);
}

TEST(Dequantize, Fp8BlockScaledPartialBlocks) {
  // 3 x 5 weights of 1.0 in 2 x 2 blocks: scales [[1, 2, 3], [4, 5, 6]].
  std::vector<uint8_t> w(15, 0x38);
  const float scales[6] = {1, 2, 3, 4, 5, 6};
  std::vector<float> y(15, 0.0f);
  dequantize_fp8_block_scaled(w.data(), scales, y.data(), 3, 5, 2, 2);
  const float want[15] = {1, 1, 2, 2, 3, 1, 1, 2, 2, 3, 4, 4, 5, 5, 6};
  for (int i = 0; i < 15; ++i) EXPECT_EQ(y[size_t(i)], want[i]) << i;
  EXPECT_THROW(dequantize_fp8_block_scaled(w.data(), scales, y.data(), 3, 5, 0, 2), Error);
}

TEST(QuantIqTables, SpotValues) {
  // Rows whose values are easy to state: all-smallest magnitudes, and the first with a change.
  EXPECT_EQ(kIq2xxsGrid[0], 0x0808080808080808ull);
  EXPECT_EQ(kIq2xxsGrid[1], 0x080808080808082bull);
  EXPECT_EQ(kIq1sGrid[0], 0xffffffffffffffffull);  // eight -1s
  EXPECT_EQ(kIq3xxsGrid[0], 0x04040404u);
  EXPECT_EQ(kIq3sGrid[0], 0x01010101u);
  for (int i = 0; i < 128; ++i) {
    // A sign byte is its 7-bit index plus a parity bit making the count of set bits even.
    EXPECT_EQ(kKsignsIq2xs[i] & 0x7f, i);
    EXPECT_EQ(__builtin_popcount(kKsignsIq2xs[i]) % 2, 0);
  }
  for (int j = 0; j < 8; ++j) EXPECT_EQ(kKmaskIq2xs[j], 1 << j);
  EXPECT_EQ(kValuesIq4nl[0], -127);
  EXPECT_EQ(kValuesIq4nl[15], 113);
  EXPECT_EQ(kValuesMxfp4[7], 12);
  EXPECT_EQ(kValuesMxfp4[15], -12);
  EXPECT_EQ(kIq1sDelta, 0.125f);
}

TEST(QuantIqTables, GridValuesComeFromTheTypeAlphabets) {
  auto bytes_in = [](uint64_t row, int count, std::initializer_list<int> allowed) {
    for (int j = 0; j < count; ++j) {
      const int v = int((row >> (8 * j)) & 0xff);
      if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) return false;
    }
    return true;
  };
  for (uint64_t r : kIq2xxsGrid) EXPECT_TRUE(bytes_in(r, 8, {0x08, 0x19, 0x2b}));
  for (uint64_t r : kIq2xsGrid) EXPECT_TRUE(bytes_in(r, 8, {0x08, 0x19, 0x2b}));
  for (uint64_t r : kIq2sGrid) EXPECT_TRUE(bytes_in(r, 8, {0x08, 0x19, 0x2b}));
  for (uint64_t r : kIq1sGrid) EXPECT_TRUE(bytes_in(r, 8, {0xff, 0x00, 0x01}));
  for (uint32_t r : kIq3xxsGrid) {
    EXPECT_TRUE(bytes_in(r, 4, {0x04, 0x0c, 0x14, 0x1c, 0x24, 0x2c, 0x34, 0x3e}));
  }
  for (uint32_t r : kIq3sGrid) {
    EXPECT_TRUE(bytes_in(r, 4, {0x01, 0x03, 0x05, 0x07, 0x09, 0x0b, 0x0d, 0x0f}));
  }
}

}  // namespace
}  // namespace sluice
