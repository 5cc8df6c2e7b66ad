// The placement decision and the memory figures it starts from.
#include "experts/planner.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "experts/expert_cache.h"
#include "experts/slot_classes.h"

namespace sluice::experts {
namespace {

constexpr uint64_t kGiB = uint64_t(1) << 30;

uint64_t read_u64_file(const char* path, uint64_t fallback) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return fallback;
  try {
    return std::stoull(text);
  } catch (...) {
    return fallback;
  }
}

}  // namespace

std::string format_bytes(uint64_t bytes) {
  char text[32];
  if (bytes >= kGiB) {
    std::snprintf(text, sizeof text, "%.2f GiB", double(bytes) / double(kGiB));
  } else if (bytes >= (uint64_t(1) << 20)) {
    std::snprintf(text, sizeof text, "%.1f MiB", double(bytes) / double(1 << 20));
  } else if (bytes >= 1024) {
    std::snprintf(text, sizeof text, "%.1f KiB", double(bytes) / 1024.0);
  } else {
    std::snprintf(text, sizeof text, "%llu B", static_cast<unsigned long long>(bytes));
  }
  return text;
}

uint64_t available_memory_bytes() {
  uint64_t available = 0;
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  uint64_t value = 0;
  while (meminfo >> key >> value >> unit) {
    if (key == "MemAvailable:") available = value * 1024;
  }
  const uint64_t limit = read_u64_file("/sys/fs/cgroup/memory.max", UINT64_MAX);
  if (limit != UINT64_MAX) {
    const uint64_t used = read_u64_file("/sys/fs/cgroup/memory.current", 0);
    available = std::min(available, limit > used ? limit - used : 0);
  }
  return available;
}

uint64_t default_ram_budget() {
  const uint64_t available = available_memory_bytes();
  const uint64_t headroom = std::max(available / 10, 2 * kGiB);
  return available > headroom ? available - headroom : 0;
}

Placement plan_placement(const ExpertLayout& layout, const PlacementRequest& r) {
  Placement plan;
  plan.expert_bytes = layout.total_bytes();
  plan.resident_bytes = r.weight_bytes - plan.expert_bytes + r.kv_bytes + r.scratch_bytes;
  plan.budget = r.ram_budget != 0 ? r.ram_budget : default_ram_budget();
  plan.slot_bytes = expert_slot_bytes(layout);
  auto say = [&](auto&&... parts) {
    std::ostringstream line;
    (line << ... << parts);
    plan.reasons.push_back(line.str());
  };
  say("budget ", format_bytes(plan.budget),
      r.ram_budget != 0 ? " (--ram-budget)" : " (available memory minus max(10%, 2 GiB))");
  say("resident: ", format_bytes(r.weight_bytes - plan.expert_bytes),
      " of weights (all but the routed experts) + ", format_bytes(r.kv_bytes), " KV cache + ",
      format_bytes(r.scratch_bytes), " scratch = ", format_bytes(plan.resident_bytes));
  say("routed experts: ", layout.n_moe_layers(), " layers, ", format_bytes(plan.expert_bytes),
      " in all, ", format_bytes(layout.max_expert_bytes()), " per expert");
  if (plan.resident_bytes > plan.budget) {
    fail("the model does not fit: its resident part needs ", format_bytes(plan.resident_bytes),
         " but the RAM budget is ", format_bytes(plan.budget),
         " (raise --ram-budget, or use a smaller context)");
  }
  if (!r.force_stream && r.n_slots == 0 && plan.resident_bytes + plan.expert_bytes <= plan.budget) {
    say("everything fits: routed experts stay resident (mapped from the file)");
    return plan;
  }
  plan.stream = true;
  const SlotClasses classes = slot_classes(layout, r.per_layer_pools);
  int64_t total_experts = 0;
  for (const SlotClass& c : classes.classes) total_experts += c.n_experts;
  const int64_t floor = layout.n_expert_used * int64_t(classes.classes.size());
  const auto bytes_of = [&](int64_t n_slots) {
    return n_slots < floor ? uint64_t(n_slots) * plan.slot_bytes
                           : classes.bytes(classes.split(n_slots, layout.n_expert_used));
  };
  const uint64_t room = plan.budget - plan.resident_bytes;
  // The most slots whose pools fit the room (the bytes grow with the count).
  int64_t fit = 0;
  for (int64_t lo = 0, hi = total_experts; lo <= hi;) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (bytes_of(mid) <= room) {
      fit = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  // More slots than experts would never be used.
  plan.n_slots = std::min(r.n_slots != 0 ? r.n_slots : fit, total_experts);
  say(r.force_stream ? "streaming routed experts (--stream-experts)"
                     : "streaming routed experts: they do not fit beside the resident part");
  const uint64_t cache_bytes = bytes_of(plan.n_slots);
  if (classes.classes.size() == 1 && !r.per_layer_pools) {
    say("expert cache: ", plan.n_slots, " slots of ", format_bytes(plan.slot_bytes), " = ",
        format_bytes(cache_bytes),
        r.n_slots != 0 ? " (--expert-cache)" : " (what the budget leaves)", "; the floor is ",
        floor, " (one token's experts of one layer); ", total_experts, " experts in all");
  } else {
    say("expert cache: ", plan.n_slots, " slots = ", format_bytes(cache_bytes),
        r.n_slots != 0 ? " (--expert-cache)" : " (what the budget leaves)", "; the floor is ",
        floor, " (one token's experts of one layer, for each of ", classes.classes.size(),
        r.per_layer_pools ? " layers, --expert-pools layer" : " expert sizes", "); ", total_experts,
        " experts in all");
    if (plan.n_slots >= floor && !r.per_layer_pools) {
      const std::vector<int64_t> counts = classes.split(plan.n_slots, layout.n_expert_used);
      for (size_t c = 0; c < counts.size(); ++c) {
        say("  ", counts[c], " slots of ", format_bytes(classes.classes[c].slot_bytes), " for the ",
            classes.classes[c].n_layers, " layers whose experts take that size");
      }
    }
  }
  if (plan.n_slots > fit) {
    fail("--expert-cache ", r.n_slots, " needs ", format_bytes(cache_bytes), " but the budget ",
         format_bytes(plan.budget), " leaves ", format_bytes(room), " after the resident part (",
         fit, " slots)");
  }
  if (plan.n_slots < floor) {
    fail("the expert cache does not fit: the budget ", format_bytes(plan.budget), " leaves ",
         format_bytes(room), " after the resident part, room for ", fit,
         " slots, below the floor of ", floor);
  }
  return plan;
}

}  // namespace sluice::experts
