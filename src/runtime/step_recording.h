// StepRecording: whether recording decode steps (a backend's recorded steps: CUDA graphs) pays
// off for this model, found by measuring. A recorded step is recorded anew every token, on the
// host, before the GPU starts; a step launched op by op lets the host run ahead of the GPU. So
// small models gain from recording and large ones lose (H200: SmolLM2 and Gemma 3 270M +10–30%,
// a Llama 3.1 8B-shaped model −10%, docs/BENCHMARKS.md). The first decode steps alternate
// between the two, timed; then the one with the lower median time is kept.
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
  std::vector<double> recorded_, plain_;
};

}  // namespace sluice
