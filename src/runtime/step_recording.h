// StepRecording: whether recording decode steps (a backend's recorded steps: CUDA graphs) pays
// off for this model, found by measuring. A recorded step is captured once and then replayed
// (the backend checks each step's ops against the recording on the host and relaunches the
// graph), so what is timed is the replay; a step launched op by op lets the host run ahead of
// the GPU instead. Small models gain from recording; large ones may not (docs/BENCHMARKS.md).
// The first decode steps are timed in blocks, because a plain step drops the recording and
// alternating would make every recorded step a capture: kTrials + 1 recorded steps (the first,
// the capture, not timed), then kTrials plain ones; then the kind with the lower median is kept.
#pragma once

#include <cstddef>
#include <vector>

namespace sluice {

class StepRecording {
 public:
  static constexpr size_t kTrials = 6;  // timed steps of each kind

  // Whether the next decode step should be recorded.
  bool want() const;
  // The wall time of a decode step and whether it was recorded.
  void observe(bool recorded, double seconds);

 private:
  bool capture_seen_ = false;  // the block's first recorded step (the capture) went by
  std::vector<double> recorded_, plain_;
};

}  // namespace sluice
