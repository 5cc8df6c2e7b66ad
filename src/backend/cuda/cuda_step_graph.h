// StepGraph: one forward step recorded as a CUDA graph, then REPLAYED for the steps that follow
// without recording them again. A decode step launches hundreds of small kernels, and launching
// them one by one costs the host more time than they take on the GPU; capturing them anew every
// token costs about as much again. So, as llama.cpp does, the graph is captured once and only
// relaunched while the steps stay the same: every op of a later step computes its signature
// (cuda_op_signature.h) and checks it against the op recorded at the same index, launching
// nothing; what changes from token to token is data the graph reads from memory, not kernel
// arguments — uploads (token ids) through a pinned staging area the graph's copies read,
// positions through a parameter table (a pinned host table copied by the graph's first node into
// a device table that rope, kv_store and attention read), downloads (logits) landing in the
// staging area and copied to their host destinations after the launch. Any difference drops the
// recording and throws (the caller runs the step unrecorded; the next recorded step captures
// anew, updating the executable graph in place when its shape allows). An op run unrecorded
// drops the recording too: plain ops may grow or free buffers whose old addresses the graph
// holds. SLUICE_CUDA_GRAPHS=0 (cuda_backend.cu) turns graphs off. Plain C++ header.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/cuda_op_signature.h"

namespace sluice::cuda {

class StepGraph {
 public:
  // Positions one step can take from the parameter table (a decode step uses three per layer).
  static constexpr size_t kPositionSlots = 4096;

  explicit StepGraph(const Stream& stream) : stream_(stream) {}
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // Between begin() and end_and_run() / abort(): a step is being captured or replayed.
  bool recording() const { return mode_ != Mode::kOff; }
  // Starts a step: a replay of the held recording when there is one, else a capture of the
  // stream's work.
  void begin();
  // Every op of the backend, first thing. Not recording: drops the held recording, false (the
  // op launches as usual). Capturing: appends `op` to the recording, false (the op launches
  // into the capture). Replaying: true when `op` equals the recorded op at this index (the op
  // launches nothing); otherwise drops the recording and throws sluice::Error.
  bool replayed(const OpSignature& op);
  // Ops that have called replayed() so far, in every mode and step: the stream's op numbers
  // (output_quantize_plan.h tells adjacent ops by them).
  uint64_t ops_seen() const { return ops_seen_; }
  // While recording: the device address of a parameter-table slot that holds `position` when
  // the step runs (its value written now, copied by the graph's first node). nullptr when not
  // recording: the op passes the position by value.
  const int64_t* position_slot(int64_t position);
  // While recording: an upload whose host bytes are copied into the staging area now, and a
  // download completed by end_and_run. Throw sluice::Error when the staging area is full (the
  // next capture makes it as large as this step needed).
  void stage_upload(void* dst, const void* host, size_t bytes);
  void stage_download(void* host, const void* src, size_t bytes);
  // While recording: a download into page-locked host memory, copied there by the graph itself
  // (the op's signature must hold `host`: a replay writes to the address captured).
  void direct_download(void* host, const void* src, size_t bytes);
  // Marks the step as one the graph cannot run (memory freed inside it): end_and_run throws.
  void fail_step() noexcept;
  // Ends the step: instantiates (or updates) the captured graph, or checks that the replay met
  // every recorded op; launches it, waits for it and completes the downloads. Throws when the
  // step cannot run as a graph (nothing of it ran then, unless the launch itself failed).
  void end_and_run();
  // Ends a step that failed and drops the recording; the stream is usable again.
  void abort() noexcept;
  // Forgets the recording (the executable graph stays, to be updated by the next capture).
  void drop() noexcept { held_ = false; }
  uint64_t captures() const { return times_.captured; }
  uint64_t replays() const { return times_.replayed; }
  const RecordedStepTimes& times() const { return times_; }

 private:
  enum class Mode : uint8_t { kOff, kCapturing, kReplaying };
  struct Download {
    void* host;
    size_t offset;
    size_t bytes;
  };

  void begin_capture();
  void run_captured();
  void launch_and_complete();
  size_t reserve_staging(size_t bytes);  // offset of `bytes` in the staging area
  [[noreturn]] void mismatch(const char* what);

  const Stream& stream_;
  PinnedBuffer staging_;
  size_t staged_ = 0;                // bytes of the staging area this step uses
  size_t wanted_ = size_t(1) << 20;  // size the next capture gives the staging area
  std::vector<Download> downloads_;
  PinnedBuffer positions_host_;   // [kPositionSlots] int64, this step's positions
  DeviceBuffer positions_table_;  // [kPositionSlots] int64, what the kernels read
  size_t positions_used_ = 0;
  // The recording: each op's signature words, op after op; op i ends at op_ends_[i].
  std::vector<uint64_t> recorded_words_;
  std::vector<size_t> op_ends_;
  size_t replayed_ops_ = 0;  // ops of the step being replayed matched so far
  uint64_t ops_seen_ = 0;
  void* exec_ = nullptr;  // cudaGraphExec_t
  Mode mode_ = Mode::kOff;
  bool held_ = false;         // recorded_words_ and exec_ hold a step that can be replayed
  bool step_failed_ = false;  // fail_step() was called during this step
  RecordedStepTimes times_;
  std::chrono::steady_clock::time_point step_begun_;
};

// Throws sluice::Error when `stream` (a cudaStream_t) is being captured: a buffer the step's
// kernels use must not grow (be freed and reallocated) inside a capture, since kernels captured
// earlier in the same step hold the old address. The step then runs unrecorded, grows it, and
// the next recorded step captures.
void refuse_growth_while_capturing(void* stream, const char* what);

}  // namespace sluice::cuda
