// StepRecording: the first decode steps alternate between recorded and plain, then the kind with
// the lower median time is kept — a slow first recording (the graph's instantiation) or one
// slow plain step does not decide.
#include "runtime/step_recording.h"

#include <gtest/gtest.h>

namespace sluice {
namespace {

void run(StepRecording& choice, double recorded_s, double plain_s, double first_recorded_s) {
  bool first = true;
  for (size_t i = 0; i < 2 * StepRecording::kTrials; ++i) {
    const bool recorded = choice.want();
    EXPECT_EQ(recorded, i % 2 == 0) << "trial " << i << " alternates, recorded first";
    choice.observe(recorded, recorded ? (first ? first_recorded_s : recorded_s) : plain_s);
    if (recorded) first = false;
  }
}

TEST(StepRecording, KeepsRecordingWhenItIsFaster) {
  StepRecording choice;
  run(choice, 0.002, 0.003, 0.050);  // the first recording instantiates the graph: slow
  EXPECT_TRUE(choice.want());
  choice.observe(true, 1.0);  // later steps no longer count
  EXPECT_TRUE(choice.want());
}

TEST(StepRecording, StopsRecordingWhenPlainStepsAreFaster) {
  StepRecording choice;
  run(choice, 0.0040, 0.0036, 0.0040);
  EXPECT_FALSE(choice.want());
}

}  // namespace
}  // namespace sluice
