// The placement cost model (experts/placement_cost.h) and the device planner's choice by it, on
// the geometry and the rates measured on the H200 machine (docs/BENCHMARKS.md, "Fused decode,
// device tier page-locked and prefetched"): synthetic Qwen3-30B-A3B Q4_K, --vram-budget 3G
// (576 device slots), 55.4 GB/s page-locked host → device, 8.0 GB/s pageable, 106.3 GB/s CPU
// matvec. Measured there: GPU-tiered 45.5 t/s, hybrid 37.5 t/s.
#include "experts/placement_cost.h"

#include <gtest/gtest.h>

#include "experts/device_planner.h"

namespace sluice::experts {
namespace {

constexpr uint64_t kGiB = uint64_t(1) << 30;

// 48 MoE layers of 128 experts, 8 used; each expert gate and up 2048 → 768 and down 768 → 2048
// in Q4_K: 768 rows × 1152 bytes and 2048 rows × 432 bytes, 884 736 bytes each.
ExpertLayout qwen3_30b_a3b() {
  ExpertLayout l;
  l.n_expert_used = 8;
  l.layers.resize(48);
  for (ExpertLayerLayout& layer : l.layers) {
    layer.n_expert = 128;
    for (ExpertPart p : {ExpertPart::kGate, ExpertPart::kUp, ExpertPart::kDown}) {
      ExpertTensor& part = layer.parts[size_t(p)];
      part.type = QType::Q4_K;
      part.n_cols = p == ExpertPart::kDown ? 768 : 2048;
      part.n_rows = p == ExpertPart::kDown ? 2048 : 768;
      part.expert_bytes = 884736;
    }
  }
  return l;
}

constexpr uint64_t kSlotBytes = 3 * 884736;  // each part already 256-byte aligned
constexpr double kPinnedH2d = 55.4e9, kPageableH2d = 8.0e9, kCpu = 106.3e9;
// The device's rate: the dense 8B's decode on the H200, weight bytes over time per token
// (1.36 TB/s, the same section) — a whole step's rate, below a bare matvec's, so the device time
// it gives is at the high end. The rest: attention (q, k, v, o in Q4_K) and the F32 router of 48
// layers, 560 MB, and the Q6_K output head, 255 MB.
constexpr double kDeviceRate = 1.36e12;
constexpr uint64_t kRestBytes = 815'000'000;

// The 3G budget of the benchmark: the rest takes what leaves room for 576 slots.
DevicePlanRequest three_gib(double h2d) {
  DevicePlanRequest r;
  r.budget = 3 * kGiB;
  r.fixed_bytes = 3 * kGiB - 576 * kSlotBytes - (uint64_t(1) << 20);
  r.slot_bytes = kSlotBytes;
  r.h2d_bytes_per_s = h2d;
  r.cpu_bytes_per_s = kCpu;
  r.device_bytes_per_s = kDeviceRate;
  r.device_rest_bytes = kRestBytes;
  return r;
}

// Uniform routing repeats k / n_expert of the previous token's experts by chance.
TEST(PlacementCost, HitRateUnderUniformRoutingIsTheSlotShare) {
  EXPECT_DOUBLE_EQ(expected_device_hit_rate(576, 48, 128, 8, 8.0 / 128), 12.0 / 128);
  EXPECT_DOUBLE_EQ(expected_device_hit_rate(1000, 10, 128, 8, 8.0 / 128), 100.0 / 128);
  EXPECT_DOUBLE_EQ(expected_device_hit_rate(6144, 48, 128, 8, 0.45), 1.0);  // every expert
  EXPECT_DOUBLE_EQ(expected_device_hit_rate(0, 48, 128, 8, 0.45), 0.0);
}

TEST(PlacementCost, RepeatedExpertsHitOnlyWhenATokensExpertsStay) {
  // 576 slots hold a token's 8 experts of all 48 layers: the 45% repeated are hits, and the
  // fresh 55% hit the 4 slots per layer beyond those 8, out of 120.
  EXPECT_NEAR(expected_device_hit_rate(576, 48, 128, 8, 0.45), 0.45 + 0.55 * 4 / 120, 1e-12);
  // 320 slots < 384: the previous token's experts of a layer are gone a token later.
  EXPECT_NEAR(expected_device_hit_rate(320, 48, 128, 8, 0.45), 320.0 / 48 / 128, 1e-12);
}

// The model against the LRU hit rates the real ExpertCache reached on Qwen3-30B-A3B-like traces
// (16 layers, 45% repeat, Zipf 0.9 popularity; docs/BENCHMARKS.md "The full policy matrix", lru
// at 10 / 25 / 50% of the slots): it leaves out the popularity skew, so it must stay below them,
// and within 8 points.
TEST(PlacementCost, HitRateStaysJustBelowTheMeasuredTraceReplays) {
  const struct {
    int64_t slots;
    double measured;
  } replays[] = {{205, 0.494}, {512, 0.633}, {1024, 0.778}};
  for (const auto& replay : replays) {
    const double model = expected_device_hit_rate(replay.slots, 16, 128, 8, kNextTokenRepeat);
    EXPECT_LT(model, replay.measured) << replay.slots;
    EXPECT_GT(model, replay.measured - 0.08) << replay.slots;
  }
}

TEST(PlacementCost, CopiesOverlapTheDeviceComputeAndHybridPaysItToo) {
  PlacementRates rates;
  rates.h2d_bytes_per_s = kPinnedH2d;
  rates.cpu_bytes_per_s = kCpu;
  rates.device_bytes_per_s = kDeviceRate;
  rates.device_rest_bytes = kRestBytes;
  const PlacementCost c = estimate_placement_cost(qwen3_30b_a3b(), 576, rates);
  EXPECT_NEAR(c.token_bytes, 384.0 * kSlotBytes, 1);
  EXPECT_NEAR(c.hit_rate, 0.45 + 0.55 * 4 / 120, 1e-9);
  EXPECT_NEAR(c.copy_s, c.token_bytes * (1 - c.hit_rate) / kPinnedH2d, 1e-12);
  EXPECT_NEAR(c.cpu_s, c.token_bytes / kCpu, 1e-12);  // 9.59 ms, as the planner said before
  EXPECT_NEAR(c.rest_s, double(kRestBytes) / kDeviceRate, 1e-12);
  // Every layer's copy (0.20 ms) outlasts its device compute (0.03 ms): the copies set the pace.
  EXPECT_NEAR(c.tiered_s, c.copy_s, 1e-12);
  EXPECT_NEAR(c.hybrid_s, c.cpu_s + c.rest_s, 1e-12);
  // A device faster than its copies hides all of its compute behind them, never more.
  rates.device_bytes_per_s = 0;
  const PlacementCost unknown = estimate_placement_cost(qwen3_30b_a3b(), 576, rates);
  EXPECT_EQ(unknown.device_s, 0);
  EXPECT_NEAR(unknown.tiered_s, c.copy_s, 1e-12);
  EXPECT_NEAR(unknown.hybrid_s, c.cpu_s, 1e-12);
  // A slow device: its compute, not the copies, sets the tier's pace.
  rates.device_bytes_per_s = 1e11;
  const PlacementCost slow = estimate_placement_cost(qwen3_30b_a3b(), 576, rates);
  EXPECT_NEAR(slow.tiered_s, slow.device_s, 1e-12);
  EXPECT_GT(slow.device_s, slow.copy_s);
}

TEST(PlacementCost, ThreeGibOnTheH200PrefersTheDeviceTier) {
  const DevicePlan plan = plan_device_experts(qwen3_30b_a3b(), three_gib(kPinnedH2d));
  ASSERT_EQ(plan.mode, DevicePlan::Mode::kSlots) << plan.reasons[0];
  EXPECT_EQ(plan.n_slots, 576);
  // --explain names both estimates and what they are made of.
  for (const char* figure :
       {"device tier 9.78 ms", "542 MB of copies at 55.4 GB/s", "47% expected slot hits",
        "against hybrid 10.19 ms", "9.59 ms of expert matvecs on the CPU at 106.3 GB/s"}) {
    EXPECT_NE(plan.reasons[0].find(figure), std::string::npos) << figure << "\n" << plan.reasons[0];
  }
  // With the CPU's rate from DRAM (59.7 GB/s on that host, bench/cpu_matvec_working_set; the
  // 106.3 was a 64 MiB matrix in its 300 MiB L3) the device tier wins by far, device rate or not.
  DevicePlanRequest dram = three_gib(kPinnedH2d);
  dram.cpu_bytes_per_s = 59.7e9;
  dram.device_bytes_per_s = 0;
  EXPECT_EQ(plan_device_experts(qwen3_30b_a3b(), dram).mode, DevicePlan::Mode::kSlots);
  // Under uniform routing (9% hits) the copies would be 16.7 ms: hybrid.
  DevicePlanRequest uniform = three_gib(kPinnedH2d);
  uniform.repeat = 8.0 / 128;
  EXPECT_EQ(plan_device_experts(qwen3_30b_a3b(), uniform).mode, DevicePlan::Mode::kHybrid);
}

TEST(PlacementCost, NearlyEveryExpertMissingPrefersHybrid) {
  // 64 slots: 1.3 per layer, fewer than a token's 8 — about 1% hits, 18.2 ms of copies.
  DevicePlanRequest r = three_gib(kPinnedH2d);
  r.fixed_bytes = r.budget - 64 * kSlotBytes - (uint64_t(1) << 20);
  const DevicePlan plan = plan_device_experts(qwen3_30b_a3b(), r);
  EXPECT_EQ(plan.mode, DevicePlan::Mode::kHybrid);
  EXPECT_NE(plan.reasons[0].find("faster than the device tier"), std::string::npos)
      << plan.reasons[0];
  EXPECT_NE(plan.reasons[0].find("1% expected slot hits"), std::string::npos) << plan.reasons[0];
}

TEST(PlacementCost, ASlowLinkPrefersHybrid) {
  // Pageable memory: 542 MB at 8 GB/s is 68 ms against the CPU's 10.2 ms.
  const DevicePlan plan = plan_device_experts(qwen3_30b_a3b(), three_gib(kPageableH2d));
  EXPECT_EQ(plan.mode, DevicePlan::Mode::kHybrid);
  EXPECT_NE(plan.reasons[0].find("device tier 67.7"), std::string::npos) << plan.reasons[0];
}

}  // namespace
}  // namespace sluice::experts
