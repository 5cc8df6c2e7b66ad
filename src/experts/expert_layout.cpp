// ExpertLayout's sums.
#include "experts/expert_layout.h"

#include <algorithm>

namespace sluice::experts {

const char* expert_part_name(ExpertPart part) {
  switch (part) {
    case ExpertPart::kGate:
      return "gate";
    case ExpertPart::kUp:
      return "up";
    case ExpertPart::kDown:
      return "down";
    case ExpertPart::kGateUp:
      return "gate_up";
  }
  return "?";
}

uint64_t ExpertLayerLayout::expert_bytes() const {
  uint64_t bytes = 0;
  for (const ExpertTensor& part : parts) bytes += part.expert_bytes;
  return bytes;
}

bool ExpertLayout::empty() const {
  return n_moe_layers() == 0;
}

uint64_t ExpertLayout::total_bytes() const {
  uint64_t bytes = 0;
  for (const ExpertLayerLayout& layer : layers)
    bytes += uint64_t(layer.n_expert) * layer.expert_bytes();
  return bytes;
}

uint64_t ExpertLayout::max_expert_bytes() const {
  uint64_t bytes = 0;
  for (const ExpertLayerLayout& layer : layers) bytes = std::max(bytes, layer.expert_bytes());
  return bytes;
}

int64_t ExpertLayout::n_moe_layers() const {
  return std::count_if(layers.begin(), layers.end(),
                       [](const ExpertLayerLayout& layer) { return layer.n_expert > 0; });
}

}  // namespace sluice::experts
