// Slot size classes of the expert cache. Models quantized with "boosted layer" recipes store
// some layers' experts in a wider type than the rest (a few layers Q4_K, most IQ2_XXS), so one
// slot size for all would leave most slots mostly empty; the cache keeps one pool per distinct
// slot size instead, and these are its classes. Knows no architecture.
#pragma once

#include <cstdint>
#include <vector>

#include "experts/expert_layout.h"

namespace sluice::experts {

// Bytes one slot needs for an expert of this layer: every part with room to read each part's
// 4 KiB-aligned enclosing extent.
uint64_t layer_slot_bytes(const ExpertLayerLayout& layer);

struct SlotClass {
  uint64_t slot_bytes = 0;
  int64_t n_layers = 0;   // MoE layers whose experts take this size
  int64_t n_experts = 0;  // routed experts of those layers
};

struct SlotClasses {
  std::vector<SlotClass> classes;       // ascending slot_bytes (per size) or layer order
  std::vector<int32_t> class_of_layer;  // [n_layer]; -1 for a layer without routed experts

  // `n_slots` slots shared out in proportion to each class's layers (one token needs the same
  // number of experts in every layer), each class at least `floor` and at most its experts.
  // Precondition: n_slots >= floor * classes.size().
  std::vector<int64_t> split(int64_t n_slots, int64_t floor) const;
  uint64_t bytes(const std::vector<int64_t>& counts) const;  // of that many slots per class
};

// One class per distinct slot size, or (per_layer) one per MoE layer: the "per-layer pools"
// alternative, where a layer's misses only ever evict that layer's experts.
SlotClasses slot_classes(const ExpertLayout& layout, bool per_layer = false);

}  // namespace sluice::experts
