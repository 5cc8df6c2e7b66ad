// Slot size classes: layers grouped by the slot their experts need, a slot count shared out in
// proportion to the layers (each class at least the floor), and the planner sizing the cache
// from the classes' bytes rather than the largest slot times the count.
#include "experts/slot_classes.h"

#include <gtest/gtest.h>

#include "experts/planner.h"

namespace sluice::experts {
namespace {

constexpr uint64_t kMiB = uint64_t(1) << 20;

// Layer 0 dense; layer 1 "boosted" (parts of 2 MiB); layers 2..4 parts of 1 MiB; 16 experts.
ExpertLayout mixed_layout() {
  ExpertLayout l;
  l.n_expert_used = 2;
  l.layers.resize(5);
  for (size_t il = 1; il < 5; ++il) {
    ExpertLayerLayout& layer = l.layers[il];
    layer.n_expert = 16;
    for (size_t p = 0; p < 3; ++p) layer.parts[p].expert_bytes = il == 1 ? 2 * kMiB : kMiB;
  }
  return l;
}

TEST(SlotClasses, GroupLayersBySlotSize) {
  const SlotClasses classes = slot_classes(mixed_layout());
  ASSERT_EQ(classes.classes.size(), 2u);
  EXPECT_EQ(classes.classes[0].slot_bytes, 3 * (kMiB + 4096));
  EXPECT_EQ(classes.classes[1].slot_bytes, 3 * (2 * kMiB + 4096));
  EXPECT_EQ(classes.classes[0].n_layers, 3);
  EXPECT_EQ(classes.classes[1].n_layers, 1);
  EXPECT_EQ(classes.classes[0].n_experts, 48);
  EXPECT_EQ(classes.class_of_layer, (std::vector<int32_t>{-1, 1, 0, 0, 0}));
}

TEST(SlotClasses, SplitFollowsTheLayersAboveTheFloor) {
  const SlotClasses classes = slot_classes(mixed_layout());
  EXPECT_EQ(classes.split(4, 2), (std::vector<int64_t>{2, 2}));      // the floor: 2 per class
  EXPECT_EQ(classes.split(12, 2), (std::vector<int64_t>{8, 4}));     // 8 spare: 6 + 2
  EXPECT_EQ(classes.split(13, 2), (std::vector<int64_t>{9, 4}));     // the rounding to the larger
  EXPECT_EQ(classes.split(100, 2), (std::vector<int64_t>{48, 16}));  // never above the experts
  const std::vector<int64_t> counts{8, 4};
  EXPECT_EQ(classes.bytes(counts),
            8 * classes.classes[0].slot_bytes + 4 * classes.classes[1].slot_bytes);
}

TEST(SlotClasses, PlannerSizesTheCacheByClass) {
  PlacementRequest r;
  r.weight_bytes = 240 * kMiB + 50 * kMiB;  // the experts (3 × 48 + 96 MiB) + 50 MiB of the rest
  r.force_stream = true;
  r.ram_budget = 50 * kMiB + 60 * kMiB;  // 60 MiB for slots
  const Placement plan = plan_placement(mixed_layout(), r);
  const SlotClasses classes = slot_classes(mixed_layout());
  ASSERT_TRUE(plan.stream);
  // The most slots whose pools fit 60 MiB: more than 60 MiB / largest slot (~6 MiB) would allow.
  EXPECT_LE(classes.bytes(classes.split(plan.n_slots, 2)), 60 * kMiB);
  EXPECT_GT(classes.bytes(classes.split(plan.n_slots + 1, 2)), 60 * kMiB);
  EXPECT_GT(plan.n_slots, int64_t(60 * kMiB / classes.classes[1].slot_bytes));
}

}  // namespace
}  // namespace sluice::experts
