// The device planner: every expert on the GPU when it fits, else device slots or the CPU
// (hybrid) by the measured rates, the user's --gpu-moe / --cpu-moe / --gpu-expert-cache obeyed,
// and a refusal with the figures when nothing fits.
#include "experts/device_planner.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace sluice::experts {
namespace {

constexpr uint64_t kMiB = uint64_t(1) << 20;

// 4 MoE layers of 64 experts of 2 MiB (gate, up, down), 8 used per token: 512 MiB of experts,
// 64 MiB read per token.
ExpertLayout layout() {
  ExpertLayout l;
  l.n_expert_used = 8;
  l.layers.resize(5);  // layer 0 dense
  for (size_t il = 1; il < l.layers.size(); ++il) {
    l.layers[il].n_expert = 64;
    for (ExpertPart p : {ExpertPart::kGate, ExpertPart::kUp, ExpertPart::kDown}) {
      l.layers[il].parts[size_t(p)].expert_bytes = 2 * kMiB / 3 + (p == ExpertPart::kDown ? 2 : 1);
    }
  }
  return l;
}

DevicePlanRequest request(uint64_t budget_mib) {
  DevicePlanRequest r;
  r.budget = budget_mib * kMiB;
  r.fixed_bytes = 100 * kMiB;
  r.slot_bytes = 2 * kMiB + 512;
  return r;
}

TEST(DevicePlanner, EveryExpertOnTheDeviceWhenTheyFit) {
  const DevicePlan plan = plan_device_experts(layout(), request(1024));
  EXPECT_EQ(plan.mode, DevicePlan::Mode::kAllOnDevice);
  ASSERT_EQ(plan.reasons.size(), 1u);
  EXPECT_NE(plan.reasons[0].find("every routed expert resident too"), std::string::npos);
}

TEST(DevicePlanner, SlotsWhenTheHostStreamsOrTheUserAsks) {
  DevicePlanRequest r = request(1024);
  r.host_streams = true;
  EXPECT_EQ(plan_device_experts(layout(), r).mode, DevicePlan::Mode::kSlots);
  EXPECT_EQ(plan_device_experts(layout(), r).n_slots, 256);  // all there are
  r.forced_slots = 40;
  EXPECT_EQ(plan_device_experts(layout(), r).n_slots, 40);
}

// 300 MiB of budget: 200 MiB hold 99 slots of 256 experts, ~25 per layer; with 45% of a token's
// experts repeating (placement_cost.h) 61% hit, ~26 MB of copies per token, 1.3 ms at 20 GB/s.
// The CPU reading 64 MiB at 100 GB/s (0.67 ms) wins, at 20 GB/s (3.4 ms) it loses.
TEST(DevicePlanner, ChoosesBetweenSlotsAndTheCpuByTheMeasuredRates) {
  DevicePlanRequest r = request(300);
  r.h2d_bytes_per_s = 20e9;
  r.cpu_bytes_per_s = 100e9;
  DevicePlan plan = plan_device_experts(layout(), r);
  EXPECT_EQ(plan.mode, DevicePlan::Mode::kHybrid);
  EXPECT_NE(plan.reasons[0].find("faster than the device tier"), std::string::npos)
      << plan.reasons[0];
  r.cpu_bytes_per_s = 20e9;
  plan = plan_device_experts(layout(), r);
  EXPECT_EQ(plan.mode, DevicePlan::Mode::kSlots);
  EXPECT_EQ(plan.n_slots, 99);
  r.cpu_bytes_per_s = 50e9;
  r.compute = ExpertCompute::kDevice;  // --gpu-moe
  EXPECT_EQ(plan_device_experts(layout(), r).mode, DevicePlan::Mode::kSlots);
  r.compute = ExpertCompute::kAuto;
  r.forced_slots = 64;  // --gpu-expert-cache 64 asks for the device tier whatever the rates say
  plan = plan_device_experts(layout(), r);
  EXPECT_EQ(plan.mode, DevicePlan::Mode::kSlots);
  EXPECT_EQ(plan.n_slots, 64);
  EXPECT_NE(plan.reasons[0].find("(--gpu-expert-cache)"), std::string::npos) << plan.reasons[0];
  r.forced_slots = 0;
  r.compute = ExpertCompute::kCpu;  // --cpu-moe, even where everything would fit
  EXPECT_EQ(plan_device_experts(layout(), request(4096)).mode, DevicePlan::Mode::kAllOnDevice);
  DevicePlanRequest cpu = request(4096);
  cpu.compute = ExpertCompute::kCpu;
  EXPECT_EQ(plan_device_experts(layout(), cpu).mode, DevicePlan::Mode::kHybrid);
}

// The hybrid placement keeps device slots for its long prefill chunks: as many as the budget
// gives up to one layer's experts (or --gpu-expert-cache's count), none when they would hold
// fewer than one token's experts.
TEST(DevicePlanner, TheHybridKeepsSlotsForLongPrefillChunks) {
  DevicePlanRequest r = request(160);  // 60 MiB: 29 slots
  r.compute = ExpertCompute::kCpu;
  DevicePlan plan = plan_device_experts(layout(), r);
  EXPECT_EQ(plan.mode, DevicePlan::Mode::kHybrid);
  EXPECT_EQ(plan.n_slots, 29);
  ASSERT_EQ(plan.reasons.size(), 2u);
  EXPECT_NE(plan.reasons[1].find("prefill chunks of 32+ tokens: experts copied to 29 device slots"),
            std::string::npos)
      << plan.reasons[1];
  DevicePlanRequest big = request(4096);
  big.compute = ExpertCompute::kCpu;
  EXPECT_EQ(plan_device_experts(layout(), big).n_slots, 64);  // one layer's experts
  big.forced_slots = 200;                                     // --gpu-expert-cache 200
  EXPECT_EQ(plan_device_experts(layout(), big).n_slots, 200);
  // Chosen by the rates, the same.
  DevicePlanRequest rates = request(300);
  rates.h2d_bytes_per_s = 20e9;
  rates.cpu_bytes_per_s = 100e9;
  plan = plan_device_experts(layout(), rates);
  EXPECT_EQ(plan.mode, DevicePlan::Mode::kHybrid);
  EXPECT_EQ(plan.n_slots, 64);
  // 10 MiB: 4 slots, fewer than one token's 8 experts; a budget the rest overfills: none.
  for (uint64_t budget : {110, 90}) {
    DevicePlanRequest small = request(budget);
    small.compute = ExpertCompute::kCpu;
    plan = plan_device_experts(layout(), small);
    EXPECT_EQ(plan.mode, DevicePlan::Mode::kHybrid);
    EXPECT_EQ(plan.n_slots, 0);
    EXPECT_NE(plan.reasons.back().find("experts on the CPU too"), std::string::npos)
        << plan.reasons.back();
  }
}

TEST(DevicePlanner, TooFewSlotsGoToTheCpuOrAreRefused) {
  DevicePlanRequest r = request(110);  // 10 MiB: 4 slots, fewer than one token's 8 experts
  EXPECT_EQ(plan_device_experts(layout(), r).mode, DevicePlan::Mode::kHybrid);
  r.compute = ExpertCompute::kDevice;
  EXPECT_THROW(plan_device_experts(layout(), r), Error);
  EXPECT_THROW(plan_device_experts(layout(), request(90)), Error);  // the rest does not fit
}

}  // namespace
}  // namespace sluice::experts
