// ExpertProfile: how often a run used each routed expert of each layer, and which experts fired
// together (co-activation: pairs chosen for the same token in the same layer). A run records
// it (the cache counts what the router asked for) and saves it to a file named on the command
// line; a later run loads it to share the cache's slots out per layer, to pre-warm the cache
// before the first token, or (`sluice repack --order coactivation`) to store experts that fire
// together next to each other. Knows layouts and counts, no architecture and no I/O engine.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "experts/expert_layout.h"

namespace sluice::experts {

struct ExpertProfile {
  struct Layer {
    int64_t n_expert = 0;            // 0: a layer without routed experts
    std::vector<uint64_t> uses;      // [n_expert] times the router chose each expert
    std::vector<uint32_t> together;  // [n_expert * n_expert] symmetric co-activation counts
    std::vector<int32_t> step;       // [<= n_expert_used] this step's choice (not saved)
    bool step_overflow = false;      // the step acquired more: a prefill chunk
  };
  int64_t n_expert_used = 0;
  uint64_t tokens = 0;        // one-token steps seen (decode steps)
  std::vector<Layer> layers;  // [n_layer]

  // An empty profile with the layout's shape.
  static ExpertProfile for_layout(const ExpertLayout& layout);
  // Counts one acquire of `layer`: each id's use. end_step() then counts each pair a layer
  // acquired in the step as co-activated — when the step was one token (at most n_expert_used
  // experts in the layer, so not a prefill chunk's union). No allocation: the token loop calls it.
  void record(int64_t layer, std::span<const int32_t> ids);
  void end_step();

  // Written through a temporary name and renamed. Throws sluice::Error naming the path.
  void save(const std::string& path) const;
  // Reads a saved profile; a one-line sluice::Error naming the path when the file is not one.
  static ExpertProfile load(const std::string& path);
  // A one-line sluice::Error naming `path` when the profile was made on another model shape.
  void check_matches(const ExpertLayout& layout, const std::string& path) const;
};

// Slots per MoE layer (0 for other layers) that maximise the hits the profile predicts: each
// layer gets `floor`, the rest go to the most used (layer, expert) pairs across all layers, so a
// layer whose popularity is concentrated gets fewer slots than one that spreads its choices.
// Sums to min(n_slots, every expert). Precondition: n_slots >= floor * MoE layers.
std::vector<int64_t> layer_budgets_from_profile(const ExpertProfile& profile, int64_t n_slots,
                                                int64_t floor);

// Each layer's experts, most used first (ties: lower id first): what a pre-warm loads.
std::vector<int32_t> experts_by_use(const ExpertProfile::Layer& layer);

// A storage order for one layer's experts (order[position] = expert) that puts experts that
// fire together next to each other: greedy chaining — start at the most used expert, append the
// unplaced expert most often chosen with the chain's tail, start anew from the most used
// unplaced expert when the tail has no co-activated partner left. The identity for a layer
// never seen.
std::vector<int32_t> coactivation_order(const ExpertProfile::Layer& layer);

}  // namespace sluice::experts
