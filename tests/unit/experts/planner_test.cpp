// The placement decision: resident when everything fits, streamed otherwise with as many slots
// as the budget leaves, refusals (with the figures) when the resident part or the floor does
// not fit.
#include "experts/planner.h"

#include <gtest/gtest.h>

#include "experts/expert_cache.h"
#include "sluice/error.h"

namespace sluice::experts {
namespace {

constexpr uint64_t kMiB = uint64_t(1) << 20;

// 4 layers of 16 experts, each part 1 MiB (so a slot is 3 MiB + 3 × 4 KiB).
ExpertLayout layout() {
  ExpertLayout l;
  l.n_expert_used = 4;
  l.layers.resize(4);
  for (ExpertLayerLayout& layer : l.layers) {
    layer.n_expert = 16;
    for (size_t p = 0; p < 3; ++p) {
      layer.parts[p].expert_bytes = kMiB;
      layer.parts[p].expert_stride = kMiB;
    }
  }
  return l;
}

PlacementRequest request(uint64_t budget) {
  PlacementRequest r;
  r.weight_bytes = 192 * kMiB + 100 * kMiB;  // experts + 100 MiB of the rest
  r.kv_bytes = 10 * kMiB;
  r.scratch_bytes = 10 * kMiB;
  r.ram_budget = budget;
  return r;
}

TEST(PlannerTest, EverythingFitsStaysResident) {
  const Placement plan = plan_placement(layout(), request(1024 * kMiB));
  EXPECT_FALSE(plan.stream);
  EXPECT_EQ(plan.resident_bytes, 120 * kMiB);
  EXPECT_EQ(plan.expert_bytes, 192 * kMiB);
  EXPECT_FALSE(plan.reasons.empty());
}

TEST(PlannerTest, StreamsWithWhatTheBudgetLeaves) {
  const ExpertLayout l = layout();
  const Placement plan = plan_placement(l, request(200 * kMiB));
  EXPECT_TRUE(plan.stream);
  EXPECT_EQ(plan.slot_bytes, expert_slot_bytes(l));
  EXPECT_EQ(plan.n_slots, int64_t(80 * kMiB / plan.slot_bytes));
}

TEST(PlannerTest, ForcedStreamingHoldsEveryExpertWhenRoomAllows) {
  PlacementRequest r = request(4096 * kMiB);
  r.force_stream = true;
  const Placement plan = plan_placement(layout(), r);
  EXPECT_TRUE(plan.stream);
  EXPECT_EQ(plan.n_slots, 64);  // never more slots than experts
}

TEST(PlannerTest, RefusesWhenTheResidentPartDoesNotFit) {
  EXPECT_THROW(plan_placement(layout(), request(100 * kMiB)), Error);
}

TEST(PlannerTest, RefusesACacheBelowTheFloor) {
  // 120 MiB resident + 3 slots of ~3 MiB: below the floor of 4.
  try {
    plan_placement(layout(), request(130 * kMiB));
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("below the floor of 4"), std::string::npos) << e.what();
  }
}

TEST(PlannerTest, RefusesMoreSlotsThanTheBudgetHolds) {
  PlacementRequest r = request(200 * kMiB);
  r.n_slots = 60;
  EXPECT_THROW(plan_placement(layout(), r), Error);
}

}  // namespace
}  // namespace sluice::experts
