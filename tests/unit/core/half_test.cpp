// core/half.h against the definition of the formats: every half converts exactly and back;
// float->half and float->bfloat16 round to nearest even at ties.
#include "core/half.h"

#include <gtest/gtest.h>

#include <cmath>

namespace sluice {
namespace {

TEST(Half, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float value = fp16_to_fp32(uint16_t(h));
    if (std::isnan(value)) continue;
    EXPECT_EQ(fp32_to_fp16(value), h) << "half bits " << h;
  }
}

TEST(Half, RoundsTiesToEven) {
  // 1 + 2^-11 lies halfway between 1 and the next half (1 + 2^-10): ties go to the even one, 1.
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);  // halfway past the largest half: infinity
  EXPECT_EQ(fp32_to_fp16(65519.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000);  // halfway to the smallest subnormal: even, zero
  EXPECT_EQ(fp32_to_fp16(0x1.8p-24f), 0x0002);
}

TEST(Half, Bfloat16RoundsTiesToEven) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(fp32_from_bits(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(fp32_to_bf16(fp32_from_bits(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
}

}  // namespace
}  // namespace sluice
