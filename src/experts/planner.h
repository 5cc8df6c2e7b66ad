// Planner: decides where a model's bytes live under a RAM budget. Resident: everything but the
// routed experts (embeddings, attention, norms, routers, shared experts, output head — viewed
// through the file mapping), the KV cache and scratch. Routed experts: resident too when all of
// it fits, else streamed through a cache of as many slots as the rest of the budget holds.
// Refuses, with the numbers, when even the resident part or the cache's floor does not fit;
// never plans into swap. Every decision comes with a line saying why (--explain).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "experts/expert_layout.h"

namespace sluice::experts {

struct PlacementRequest {
  uint64_t weight_bytes = 0;     // every tensor of the model file(s)
  uint64_t kv_bytes = 0;         // the KV cache reserved for one session
  uint64_t scratch_bytes = 0;    // activations and buffers of one forward
  uint64_t ram_budget = 0;       // 0: available memory minus headroom
  bool force_stream = false;     // stream routed experts even when everything fits
  int64_t n_slots = 0;           // 0: as many as the budget holds
  bool per_layer_pools = false;  // the cache keeps one pool per layer (else one per expert size)
};

struct Placement {
  bool stream = false;
  int64_t n_slots = 0;  // when streaming
  uint64_t budget = 0;
  uint64_t resident_bytes = 0;  // weights other than routed experts + KV + scratch
  uint64_t expert_bytes = 0;    // all routed experts
  uint64_t slot_bytes = 0;
  std::vector<std::string> reasons;  // one line per decision, for --explain
};

// Throws sluice::Error (with the figures) when the plan cannot fit.
Placement plan_placement(const ExpertLayout& layout, const PlacementRequest& request);

// MemAvailable from /proc/meminfo, or the cgroup's memory.max minus its usage when smaller.
uint64_t available_memory_bytes();
// The default budget: available memory minus max(10%, 2 GiB).
uint64_t default_ram_budget();

std::string format_bytes(uint64_t bytes);  // "1.50 GiB", "640.0 MiB", "512 B"

}  // namespace sluice::experts
