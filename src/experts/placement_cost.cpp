// PlacementCost: both placements' decode time per token, layer by layer.
#include "experts/placement_cost.h"

#include <algorithm>

namespace sluice::experts {

double expected_device_hit_rate(int64_t n_slots, int64_t n_layers, int64_t n_expert, int64_t k,
                                double repeat) {
  if (n_slots <= 0 || n_layers <= 0 || n_expert <= 0 || k <= 0) return 0;
  const double per_layer = std::min(double(n_slots) / double(n_layers), double(n_expert));
  if (per_layer >= double(n_expert)) return 1;
  repeat = std::clamp(repeat, 0.0, 1.0);
  if (n_slots < k * n_layers || k >= n_expert) return per_layer / double(n_expert);
  // The previous token's k experts hold k of this layer's slots; the fresh choices are uniform
  // over the other n_expert − k, of which the remaining slots hold per_layer − k.
  const double fresh_hit = (per_layer - double(k)) / double(n_expert - k);
  return repeat + (1 - repeat) * fresh_hit;
}

PlacementCost estimate_placement_cost(const ExpertLayout& layout, int64_t n_slots,
                                      const PlacementRates& rates) {
  PlacementCost cost;
  const int64_t n_layers = layout.n_moe_layers();
  if (n_layers == 0) return cost;
  const double device_rate = rates.device_bytes_per_s;
  // The rest of the forward's weights, shared out evenly over the MoE layers.
  const double rest_layer_s =
      device_rate > 0 ? double(rates.device_rest_bytes) / device_rate / double(n_layers) : 0;
  for (const ExpertLayerLayout& l : layout.layers) {
    if (l.n_expert == 0) continue;
    const double bytes = double(layout.n_expert_used) * double(l.expert_bytes());
    const double hit =
        expected_device_hit_rate(n_slots, n_layers, l.n_expert, layout.n_expert_used, rates.repeat);
    const double miss = bytes * (1 - hit);
    const double copy = rates.h2d_bytes_per_s > 0 ? miss / rates.h2d_bytes_per_s : 0;
    const double cpu = rates.cpu_bytes_per_s > 0 ? bytes / rates.cpu_bytes_per_s : 0;
    const double device = rest_layer_s + (device_rate > 0 ? bytes / device_rate : 0);
    cost.token_bytes += bytes;
    cost.miss_bytes += miss;
    cost.copy_s += copy;
    cost.cpu_s += cpu;
    cost.device_s += device;
    cost.rest_s += rest_layer_s;
    cost.tiered_s += std::max(copy, device);
    cost.hybrid_s += rest_layer_s + cpu;
  }
  cost.repeats_kept = n_slots >= layout.n_expert_used * n_layers;
  cost.hit_rate = cost.token_bytes > 0 ? 1 - cost.miss_bytes / cost.token_bytes : 0;
  return cost;
}

}  // namespace sluice::experts
