// ResidentExperts: the ExpertSource of a model that fits in memory — every expert is a view of
// the mapped model file, always ready; acquire only counts hits (choices a GPU makes on the device
// never reach it, so those are not counted). The reference the streaming
// cache must match bit for bit.
#pragma once

#include "experts/expert_source.h"

namespace sluice::experts {

class ResidentExperts final : public ExpertSource {
 public:
  explicit ResidentExperts(const ExpertLayout& layout);

  void acquire(int64_t layer, std::span<const int32_t> ids) override;
  bool ready(int64_t, int32_t) override { return true; }
  ExpertWeights wait(int64_t layer, int32_t id) override;
  void release(int64_t) override {}
  void prefetch(int64_t, std::span<const int32_t>) override {}
  // A part whose experts lie at a regular stride in one file (GGUF's 3-D tensors) is a stack.
  bool stack(int64_t layer, ExpertPart part, ExpertStack& out) const override;
  bool always_in_stack() const override { return true; }
  void end_step() override;
  const ExpertStats& stats() const override { return stats_; }

 private:
  const ExpertLayout& layout_;
  ExpertStats stats_;
};

}  // namespace sluice::experts
