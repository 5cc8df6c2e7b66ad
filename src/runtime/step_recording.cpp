// StepRecording: a block of recorded steps, a block of plain ones, then the faster by median.
#include "runtime/step_recording.h"

#include <algorithm>

namespace sluice {
namespace {

double median(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

}  // namespace

bool StepRecording::want() const {
  if (recorded_.size() < kTrials) return true;
  if (plain_.size() < kTrials) return false;
  return median(recorded_) < median(plain_);
}

void StepRecording::observe(bool recorded, double seconds) {
  if (recorded && !capture_seen_) {
    capture_seen_ = true;  // the capture and instantiation: not what later steps cost
    return;
  }
  std::vector<double>& times = recorded ? recorded_ : plain_;
  if (times.size() < kTrials) times.push_back(seconds);
}

}  // namespace sluice
