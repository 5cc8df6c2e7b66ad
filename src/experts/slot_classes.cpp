// Slot size classes: which layers share a slot size, and how a slot count is shared out.
#include "experts/slot_classes.h"

#include <algorithm>

namespace sluice::experts {
namespace {

constexpr uint64_t kAlign = 4096;

}  // namespace

uint64_t layer_slot_bytes(const ExpertLayerLayout& layer) {
  uint64_t sum = 0;
  for (const ExpertTensor& part : layer.parts) {
    if (part.present()) sum += (part.expert_bytes + kAlign - 1) / kAlign * kAlign + kAlign;
  }
  return sum;
}

SlotClasses slot_classes(const ExpertLayout& layout, bool per_layer) {
  SlotClasses result;
  result.class_of_layer.assign(layout.layers.size(), -1);
  if (per_layer) {
    for (size_t il = 0; il < layout.layers.size(); ++il) {
      const ExpertLayerLayout& layer = layout.layers[il];
      if (layer.n_expert == 0) continue;
      result.class_of_layer[il] = int32_t(result.classes.size());
      result.classes.push_back(SlotClass{layer_slot_bytes(layer), 1, layer.n_expert});
    }
    return result;
  }
  std::vector<uint64_t> sizes;
  for (const ExpertLayerLayout& layer : layout.layers) {
    if (layer.n_expert > 0) sizes.push_back(layer_slot_bytes(layer));
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  for (const uint64_t size : sizes) result.classes.push_back(SlotClass{size, 0, 0});
  for (size_t il = 0; il < layout.layers.size(); ++il) {
    const ExpertLayerLayout& layer = layout.layers[il];
    if (layer.n_expert == 0) continue;
    const auto c = std::lower_bound(sizes.begin(), sizes.end(), layer_slot_bytes(layer));
    const int32_t index = int32_t(c - sizes.begin());
    result.class_of_layer[il] = index;
    ++result.classes[size_t(index)].n_layers;
    result.classes[size_t(index)].n_experts += layer.n_expert;
  }
  return result;
}

std::vector<int64_t> SlotClasses::split(int64_t n_slots, int64_t floor) const {
  std::vector<int64_t> counts(classes.size(), floor);
  int64_t n_layers = 0;
  for (const SlotClass& c : classes) n_layers += c.n_layers;
  const int64_t spare = n_slots - floor * int64_t(classes.size());
  int64_t given = 0;
  for (size_t c = 0; c < classes.size(); ++c) {
    const int64_t share = n_layers > 0 ? spare * classes[c].n_layers / n_layers : 0;
    counts[c] += share;
    given += share;
  }
  // What the rounding left goes to the classes with the most layers first.
  std::vector<size_t> order(classes.size());
  for (size_t c = 0; c < order.size(); ++c) order[c] = c;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return classes[a].n_layers > classes[b].n_layers; });
  for (size_t i = 0; given < spare && !order.empty(); ++i, ++given)
    ++counts[order[i % order.size()]];
  for (size_t c = 0; c < classes.size(); ++c) counts[c] = std::min(counts[c], classes[c].n_experts);
  return counts;
}

uint64_t SlotClasses::bytes(const std::vector<int64_t>& counts) const {
  uint64_t total = 0;
  for (size_t c = 0; c < classes.size(); ++c) total += uint64_t(counts[c]) * classes[c].slot_bytes;
  return total;
}

}  // namespace sluice::experts
