// StepRecording: the first decode steps are timed in blocks — kTrials + 1 recorded steps (the
// first, the capture, untimed), then kTrials plain ones — and the kind with the lower median
// time is kept: a slow capture or one slow plain step does not decide.
#include "runtime/step_recording.h"

#include <gtest/gtest.h>

namespace sluice {
namespace {

// Drives the trial blocks, checking which kind each step is asked to be: seven recorded steps
// (were the capture timed, the block would end after six), then six plain ones.
void run(StepRecording& choice, double recorded_s, double plain_s, double capture_s) {
  const size_t recorded_steps = StepRecording::kTrials + 1;
  for (size_t i = 0; i < recorded_steps + StepRecording::kTrials; ++i) {
    const bool recorded = choice.want();
    EXPECT_EQ(recorded, i < recorded_steps) << "step " << i << ": a recorded block, then plain";
    choice.observe(recorded, recorded ? (i == 0 ? capture_s : recorded_s) : plain_s);
  }
}

TEST(StepRecording, KeepsRecordingWhenItIsFaster) {
  StepRecording choice;
  run(choice, 0.002, 0.003, 0.050);  // the capture instantiates the graph: slow
  EXPECT_TRUE(choice.want());
  choice.observe(true, 1.0);  // later steps no longer count
  EXPECT_TRUE(choice.want());
}

TEST(StepRecording, StopsRecordingWhenPlainStepsAreFaster) {
  StepRecording choice;
  run(choice, 0.0040, 0.0036, 0.0040);
  EXPECT_FALSE(choice.want());
  choice.observe(false, 1.0);
  EXPECT_FALSE(choice.want());
}

// Without recorded steps (graphs off, the CPU backend) every observation is plain: want() keeps
// asking and the caller keeps running plain steps; nothing is decided from plain times alone.
TEST(StepRecording, PlainStepsAloneDecideNothing) {
  StepRecording choice;
  for (size_t i = 0; i < 3 * StepRecording::kTrials; ++i) choice.observe(false, 0.001);
  EXPECT_TRUE(choice.want());
}

}  // namespace
}  // namespace sluice
