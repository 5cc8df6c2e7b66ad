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

bool ResidentExperts::stack(int64_t layer, ExpertPart p, ExpertStack& out) const {
  const ExpertLayerLayout& l = layout_.layers[size_t(layer)];
  const ExpertTensor& part = l.part(p);
  if (!part.present() || !part.expert_offsets.empty() || !part.expert_files.empty()) return false;
  File& file = *layout_.files[part.file_index];
  const uint64_t bytes = uint64_t(l.n_expert - 1) * part.expert_stride + part.expert_bytes;
  out = {part.type,
         file.view(part.offset, bytes).data(),
         int64_t(part.expert_stride),
         l.n_expert,
         part.n_cols,
         part.n_rows};
  return true;
}

void ResidentExperts::end_step() {
  stats_.close_step();
}

}  // namespace sluice::experts
