// ResidentExperts: views into the mapped files.
#include "experts/resident_experts.h"

namespace sluice::experts {

ResidentExperts::ResidentExperts(const ExpertLayout& layout)
    : layout_(layout), stats_(layout.layers.size()) {}

void ResidentExperts::acquire(int64_t layer, std::span<const int32_t> ids) {
  stats_.last_step.hits += ids.size();
  stats_.per_layer[size_t(layer)].hits += ids.size();
}

ExpertWeights ResidentExperts::wait(int64_t layer, int32_t id) {
  const ExpertLayerLayout& l = layout_.layers[size_t(layer)];
  ExpertWeights weights;
  for (size_t p = 0; p < kExpertParts; ++p) {
    const ExpertTensor& part = l.parts[p];
    if (!part.present()) continue;
    File& file = *layout_.files[part.file_of(id)];
    const uint8_t* bytes = file.view(part.offset_of(id), part.expert_bytes).data();
    weights.parts[p] = MatrixView{part.type, bytes, part.n_cols, part.n_rows};
  }
  return weights;
}

void ResidentExperts::end_step() {
  stats_.close_step();
}

}  // namespace sluice::experts
