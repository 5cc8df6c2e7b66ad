// KvCache: ring capacities of full and sliding layers, when a kept prefix can still be continued
// after a sliding ring has moved past it, and recurrent layers that are never rewound.
#include "model/kv_cache.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"

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

// A recurrent layer keeps a state of every position written: it continues only the whole
// sequence or starts over at 0, and copies only whole.
TEST(KvCache, RecurrentLayersContinueOnlyTheWholeSequence) {
  const KvLayerSpec recurrent{0, 0, 0, 0, 6, 8};
  KvCache kv({{1, 4, 4, 0}, recurrent}, 100, 4, KvElement::kF32);
  EXPECT_TRUE(kv.has_recurrent_layers());
  EXPECT_EQ(kv.bytes(), uint64_t(2 * 100 * 4 * 4 + (6 + 8) * 4));
  RecurrentLayerView view = kv.recurrent(1, 0);
  std::fill_n(view.state, 8, 1.0f);
  *view.positions = 12;
  EXPECT_EQ(kv.reusable_prefix(12, 12), 12);
  EXPECT_EQ(kv.reusable_prefix(8, 12), 0);
  EXPECT_EQ(kv.reusable_prefix(13, 13), 0);  // the state is not at the written end
  EXPECT_THROW(kv.recurrent(1, 8), Error);   // cannot rewind
  EXPECT_EQ(kv.recurrent(1, 12).state[0], 1.0f);
  EXPECT_EQ(kv.recurrent(1, 0).state[0], 0.0f);  // a sequence starting over is zeroed
  *kv.recurrent(1, 0).positions = 12;

  KvCache copy({{1, 4, 4, 0}, recurrent}, 100, 4, KvElement::kF32);
  EXPECT_THROW(copy.copy_prefix_from(kv, 8, 12), Error);
  copy.copy_prefix_from(kv, 12, 12);
  EXPECT_NO_THROW(copy.recurrent(1, 12));
}

}  // namespace
}  // namespace sluice::model
