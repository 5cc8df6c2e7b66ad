// DevicePlanner: all on the device, device slots, or the CPU computing the experts.
#include "experts/device_planner.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "experts/planner.h"

namespace sluice::experts {
namespace {

std::string milliseconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f ms", seconds * 1e3);
  return text;
}

std::string rate(double bytes_per_s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GB/s", bytes_per_s * 1e-9);
  return text;
}

std::string percent(double share) {
  return std::to_string(int64_t(share * 100 + 0.5)) + "%";
}

// The two estimates and what each is made of, for --explain.
std::string explain_cost(const PlacementCost& c, const PlacementRates& r) {
  char mb[32];
  std::snprintf(mb, sizeof mb, "%.0f MB", c.miss_bytes * 1e-6);
  const std::string device =
      r.device_bytes_per_s > 0
          ? milliseconds(c.device_s) + " of device compute at " + rate(r.device_bytes_per_s)
          : std::string("device compute (rate unknown, counted as 0)");
  return "per token: device tier " + milliseconds(c.tiered_s) + " (" + mb + " of copies at " +
         rate(r.h2d_bytes_per_s) + " host to device = " + milliseconds(c.copy_s) + ", " +
         percent(c.hit_rate) + " expected slot hits" +
         (c.repeats_kept ? " with " + percent(r.repeat) +
                               " of a token's experts repeating the previous token's"
                         : std::string(" (uniform: the slots are fewer than one token's experts "
                                       "of every layer, so repeats are evicted before reuse)")) +
         ", overlapped layer by layer with " + device + ") against hybrid " +
         milliseconds(c.hybrid_s) + " (" + milliseconds(c.cpu_s) +
         " of expert matvecs on the CPU at " + rate(r.cpu_bytes_per_s) + " after " +
         milliseconds(c.rest_s) + " of the rest on the device, not overlapped)";
}

// Device slots the budget holds beside the rest (0 when the rest alone overfills it).
int64_t slots_that_fit(const DevicePlanRequest& r) {
  if (r.fixed_bytes >= r.budget) return 0;
  return int64_t((r.budget - r.fixed_bytes) / std::max<uint64_t>(r.slot_bytes, 1));
}

int64_t all_experts(const ExpertLayout& layout) {
  int64_t all = 0;
  for (const ExpertLayerLayout& l : layout.layers) all += l.n_expert;
  return all;
}

// The hybrid placement's slots for long prefill chunks: --gpu-expert-cache, else as many as
// the budget gives up to one layer's experts — a chunk passes every layer before the next
// chunk comes, so slots beyond one layer's are never hit again — if they hold one token's.
void add_prefill_slots(const ExpertLayout& layout, const DevicePlanRequest& r, DevicePlan& plan) {
  const int64_t fit = slots_that_fit(r);
  int64_t one_layer = 0;
  for (const ExpertLayerLayout& l : layout.layers) one_layer = std::max(one_layer, l.n_expert);
  const int64_t n_slots =
      r.forced_slots > 0 ? std::min(r.forced_slots, all_experts(layout)) : std::min(fit, one_layer);
  const std::string chunks =
      "prefill chunks of " + std::to_string(kHybridDevicePrefillTokens) + "+ tokens: ";
  if (n_slots < layout.n_expert_used) {
    plan.reasons.push_back(chunks + "experts on the CPU too (" + std::to_string(n_slots) +
                           " device slots fit, fewer than one token's experts)");
    return;
  }
  plan.n_slots = n_slots;
  plan.reasons.push_back(chunks + "experts copied to " + std::to_string(n_slots) +
                         " device slots of " + format_bytes(r.slot_bytes) + " (" +
                         format_bytes(uint64_t(n_slots) * r.slot_bytes) +
                         ") and multiplied on the device");
}

}  // namespace

DevicePlan plan_device_experts(const ExpertLayout& layout, const DevicePlanRequest& r) {
  DevicePlan plan;
  if (r.compute == ExpertCompute::kCpu) {
    plan.mode = DevicePlan::Mode::kHybrid;
    plan.reasons.push_back("routed experts: computed on the CPU from the host tier (--cpu-moe)");
    add_prefill_slots(layout, r, plan);
    return plan;
  }
  const uint64_t expert_bytes = layout.total_bytes();
  if (r.fixed_bytes >= r.budget) {
    fail("backend cuda: the weights outside the experts and one session's KV cache (",
         format_bytes(r.fixed_bytes), ") do not fit the device budget of ", format_bytes(r.budget),
         " (--vram-budget)");
  }
  if (r.forced_slots == 0 && !r.host_streams && r.fixed_bytes + expert_bytes <= r.budget) {
    plan.reasons.push_back("device: every routed expert resident too (" +
                           format_bytes(expert_bytes) + "; with the rest " +
                           format_bytes(r.fixed_bytes + expert_bytes) + " of the " +
                           format_bytes(r.budget) + " device budget)");
    return plan;
  }
  const int64_t all = all_experts(layout);
  const int64_t n_slots = std::min(r.forced_slots > 0 ? r.forced_slots : slots_that_fit(r), all);

  // Both placements' decode time per token, and the figures behind them (placement_cost.h).
  const bool rates_known = r.h2d_bytes_per_s > 0 && r.cpu_bytes_per_s > 0;
  PlacementRates rates;
  rates.h2d_bytes_per_s = r.h2d_bytes_per_s;
  rates.cpu_bytes_per_s = r.cpu_bytes_per_s;
  rates.device_bytes_per_s = r.device_bytes_per_s;
  rates.device_rest_bytes = r.device_rest_bytes;
  rates.repeat = r.repeat;
  const PlacementCost cost = estimate_placement_cost(layout, std::max<int64_t>(n_slots, 0), rates);
  const std::string comparison = rates_known ? "; " + explain_cost(cost, rates) : "";
  // A slot count the user gave (--gpu-expert-cache) asks for the device tier: only the rates'
  // choice between the tiers is automatic.
  if (r.compute == ExpertCompute::kAuto && r.forced_slots == 0 &&
      (n_slots < layout.n_expert_used || (rates_known && cost.hybrid_s < cost.tiered_s))) {
    plan.mode = DevicePlan::Mode::kHybrid;
    plan.reasons.push_back(
        "routed experts: computed on the CPU from the host tier (hybrid), " +
        (n_slots < layout.n_expert_used
             ? "fewer device slots fit than one token's experts"
             : std::string("faster than the device tier by the measured rates")) +
        comparison);
    add_prefill_slots(layout, r, plan);
    return plan;
  }
  if (n_slots < layout.n_expert_used) {
    fail("backend cuda: ", n_slots, " device expert slots of ", format_bytes(r.slot_bytes),
         " fit the budget, fewer than the ", layout.n_expert_used,
         " experts one token uses (raise --vram-budget or --gpu-expert-cache, or use --cpu-moe)");
  }
  plan.mode = DevicePlan::Mode::kSlots;
  plan.n_slots = n_slots;
  plan.reasons.push_back(
      "device: " + std::to_string(n_slots) + " expert slots of " + format_bytes(r.slot_bytes) +
      " (" + format_bytes(uint64_t(n_slots) * r.slot_bytes) + ") in front of the host tier, " +
      std::to_string(all) + " experts in all (" + format_bytes(expert_bytes) + "); the rest " +
      format_bytes(r.fixed_bytes) + ", device budget " + format_bytes(r.budget) +
      (r.compute == ExpertCompute::kDevice ? " (--gpu-moe)"
       : r.forced_slots > 0                ? " (--gpu-expert-cache)"
                                           : "") +
      comparison);
  return plan;
}

}  // namespace sluice::experts
