// PlacementCost: the decode time per token of a MoE model's routed experts in the two placements
// that exist when they do not fit the device — GPU-tiered (device slots fed host → device) and
// hybrid (the CPU computes them from host memory) — from measured rates. Pure arithmetic, no
// device; experts/device_planner chooses by it and prints its figures (--explain).
//
// The model, per MoE layer l, with B_l the bytes of the k experts one token uses there:
//   tiered_l = max(B_l · (1 − hit) / h2d, device_l)
//   hybrid_l = device_rest_l + B_l / cpu
// where device_rest_l is the device's time on the layer's weights outside the routed experts
// (attention, router, norms; the output head shared out over the layers) and device_l that plus
// the k experts' products on the device. Hybrid runs them one after the other (the CPU needs the
// layer's input, the next layer its output). The device tier copies a layer's guessed misses on
// a side stream while the layer before computes (DeviceExpertSlots::prefetch → upload_ahead), so
// copies and compute overlap: a max, not a sum. That is the upper bound of the overlap — a wrong
// guess leaves a demand copy on the main stream — and is stated as such.
#pragma once

#include <cstdint>

#include "experts/expert_layout.h"

namespace sluice::experts {

// Share of a token's experts in a layer that are one of the previous token's in that layer:
// 0.45, measured on Qwen3-30B-A3B (tools/routing_trace.py; the same trace's LRU hit rates,
// docs/BENCHMARKS.md "Issue 9 — cache policies", are 2–7 points above this model's).
inline constexpr double kNextTokenRepeat = 0.45;

// Expected share of a layer's k experts already in a device slot, for n_slots slots shared by
// n_layers layers of n_expert experts (an LRU pool: n_slots / n_layers each on average). A token
// repeats `repeat` of the previous token's k experts; those are still in a slot when the pool
// holds one token's experts of every layer (n_slots ≥ k · n_layers: they are the most recently
// used). The fresh choices, uniform over the other n_expert − k, hit the slots left beyond those
// k. A pool smaller than that keeps no expert until the next token (LRU under a cycle longer
// than itself): then only the uniform share, slots per layer / n_expert. Uniform routing repeats
// k / n_expert by chance, and the formula then gives that share too: slots per layer / n_expert.
double expected_device_hit_rate(int64_t n_slots, int64_t n_layers, int64_t n_expert, int64_t k,
                                double repeat);

struct PlacementRates {
  double h2d_bytes_per_s = 0;      // host → device copies (page-locked when the tier pins)
  double cpu_bytes_per_s = 0;      // the CPU's expert matvec, weights from DRAM
  double device_bytes_per_s = 0;   // the device's matvec; 0: unknown (then no device time counted)
  uint64_t device_rest_bytes = 0;  // weights the device reads per token outside routed experts
  double repeat = kNextTokenRepeat;
};

struct PlacementCost {
  double hit_rate = 0;        // expected device slot hit rate (token-weighted over layers)
  bool repeats_kept = false;  // the slots hold a token's experts of every layer a token later
  double token_bytes = 0;     // routed expert bytes one token uses
  double miss_bytes = 0;      // of those, copied host → device
  double copy_s = 0;          // miss_bytes at h2d
  double cpu_s = 0;           // token_bytes at the CPU's rate
  double device_s = 0;        // the device's compute per token, tiered (rest + experts)
  double rest_s = 0;          // of which outside the routed experts (hybrid pays it too)
  double tiered_s = 0;        // Σ_l max(copy_l, device_l)
  double hybrid_s = 0;        // Σ_l rest_l + cpu_l
};

// Both placements' time per decode token with n_slots device slots. Rates of 0 count as
// unknown: h2d or cpu unknown gives zeros for that side (the caller then does not compare).
PlacementCost estimate_placement_cost(const ExpertLayout& layout, int64_t n_slots,
                                      const PlacementRates& rates);

}  // namespace sluice::experts
