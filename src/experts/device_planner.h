// DevicePlanner: where a MoE model's routed experts go when the rest runs on a GPU. All of them
// in device memory when they fit the device budget; else either device slots in front of the
// host tier (GPU-tiered: misses are copied host → device) or the hybrid placement (experts
// computed by the CPU from the host tier, llama.cpp's --cpu-moe). Between those two it chooses
// by experts/placement_cost: each placement's decode time per token from measured rates
// (host-to-device copy, the CPU's and the device's matvec, bytes per second), the slot hits that
// routing locality leaves, and the overlap of the device tier's copies with device compute.
// Reads from disk are left out: both placements make the same ones. Every decision comes with a
// line saying why, with the figures compared (--explain).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "experts/expert_layout.h"
#include "experts/placement_cost.h"

namespace sluice::experts {

enum class ExpertCompute : uint8_t { kAuto, kDevice, kCpu };  // --gpu-moe / --cpu-moe force one

struct DevicePlanRequest {
  uint64_t budget = 0;        // device memory the model may use
  uint64_t fixed_bytes = 0;   // weights outside the experts + one session's KV and scratch
  uint64_t slot_bytes = 0;    // one device slot (DeviceExpertSlots::slot_bytes)
  bool host_streams = false;  // the host tier streams from disk (then slots, never all)
  int64_t forced_slots = 0;   // --gpu-expert-cache; 0: as the budget allows
  ExpertCompute compute = ExpertCompute::kAuto;
  double h2d_bytes_per_s = 0;        // measured; 0: unknown (then the device tier is kept)
  double cpu_bytes_per_s = 0;        // the CPU's expert matvec, measured; 0: unknown
  double device_bytes_per_s = 0;     // the device's matvec, measured; 0: unknown (no device time)
  uint64_t device_rest_bytes = 0;    // weights the device reads per token outside routed experts
  double repeat = kNextTokenRepeat;  // routing locality (placement_cost.h)
};

// Chunks of this many tokens or more run their routed experts on the device in the hybrid
// placement too, through its device slots: a chunk multiplies each expert by many rows, so the
// CPU's arithmetic, not the copy over PCIe, is what bounds it (llama.cpp's -ot exps=CPU copies
// a batch's experts to the GPU from 32 tokens on as well). Decode and shorter chunks stay on the
// CPU.
inline constexpr int64_t kHybridDevicePrefillTokens = 32;

struct DevicePlan {
  enum class Mode : uint8_t { kAllOnDevice, kSlots, kHybrid } mode = Mode::kAllOnDevice;
  // kSlots: the device tier's slots. kHybrid: slots for the long prefill chunks
  // (kHybridDevicePrefillTokens), 0 when the budget holds fewer than one token's experts.
  int64_t n_slots = 0;
  std::vector<std::string> reasons;
};

// Throws sluice::Error (with the figures) when the rest does not fit the budget or too few slots
// do for one token's experts.
DevicePlan plan_device_experts(const ExpertLayout& layout, const DevicePlanRequest& request);

}  // namespace sluice::experts
