// KvCache: ring capacities of full and sliding layers, and when a kept prefix can still be
// continued after a sliding ring has moved past it.
#include "model/kv_cache.h"

#include <gtest/gtest.h>

namespace sluice::model {
namespace {

TEST(KvCache, SlidingLayersHoldWindowPlusBatch) {
  KvCache kv({{2, 8, 8, 0}, {2, 8, 8, 6}}, 100, 4, KvElement::kF16);
  EXPECT_EQ(kv.layer(0).capacity, 100);
  EXPECT_EQ(kv.layer(1).capacity, 9);  // 6 + 4 - 1
  EXPECT_EQ(kv.bytes(), uint64_t(2 * (100 + 9) * 2 * 8 * 2));
}

TEST(KvCache, ReusablePrefixDependsOnWhatTheRingStillHolds) {
  KvCache full({{1, 4, 4, 0}}, 100, 4, KvElement::kF32);
  EXPECT_EQ(full.reusable_prefix(50, 90), 50);
  KvCache sliding({{1, 4, 4, 0}, {1, 4, 4, 6}}, 100, 4, KvElement::kF32);  // ring of 9
  // Continuing at 10 reads positions 5..; written up to 12: cell of 5 still holds 5.
  EXPECT_EQ(sliding.reusable_prefix(10, 13), 10);
  // Written up to 14 (position 14 overwrote the cell of 5): must start over.
  EXPECT_EQ(sliding.reusable_prefix(10, 15), 0);
  EXPECT_EQ(sliding.reusable_prefix(0, 40), 0);
}

}  // namespace
}  // namespace sluice::model
