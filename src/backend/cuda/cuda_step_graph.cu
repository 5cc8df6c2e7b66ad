// StepGraph (cuda_step_graph.h): capture once, then check each later step op by op against the
// recording and relaunch the executable graph; capture anew after any difference.
#include "backend/cuda/cuda_step_graph.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "backend/cuda/cuda_check.h"
#include "core/error.h"

namespace sluice::cuda {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kStagingAlign = 256;
constexpr size_t kPositionBytes = StepGraph::kPositionSlots * sizeof(int64_t);

// Adds the time since `start` to `seconds` and returns now.
Clock::time_point add_since(Clock::time_point start, double& seconds) {
  const Clock::time_point now = Clock::now();
  seconds += std::chrono::duration<double>(now - start).count();
  return now;
}

}  // namespace

StepGraph::~StepGraph() {
  abort();
  if (exec_ != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
}

void StepGraph::begin() {
  if (recording()) fail("cuda graph: a step is already being recorded");
  step_begun_ = Clock::now();
  staged_ = 0;
  downloads_.clear();
  positions_used_ = 0;
  step_failed_ = false;
  if (held_) {
    mode_ = Mode::kReplaying;
    replayed_ops_ = 0;
    return;
  }
  begin_capture();
}

void StepGraph::begin_capture() {
  if (staging_.size() < wanted_) staging_ = PinnedBuffer(wanted_);
  if (positions_table_.size() == 0) {
    positions_host_ = PinnedBuffer(kPositionBytes);
    positions_table_ = DeviceBuffer(kPositionBytes);
  }
  recorded_words_.clear();
  op_ends_.clear();
  const auto stream = as_stream(stream_.handle());
  // Relaxed: allocations a step makes the first time it meets a size are allowed while
  // capturing; anything that would wait for the device invalidates the capture and the caller
  // runs the step again unrecorded.
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
  mode_ = Mode::kCapturing;
  // The graph's first node: the positions the ops below write into the host table (now, and at
  // every replay) reach the device table before any kernel reads it. A fixed 32 KiB: the node
  // never changes, and the copy costs about a microsecond.
  const cudaError_t copied = cudaMemcpyAsync(positions_table_.data(), positions_host_.data(),
                                             kPositionBytes, cudaMemcpyHostToDevice, stream);
  if (copied != cudaSuccess) {
    abort();
    check(copied, "cudaMemcpyAsync (position table)");
  }
}

bool StepGraph::replayed(const OpSignature& op) {
  ++ops_seen_;
  if (mode_ == Mode::kOff) {
    held_ = false;
    return false;
  }
  if (op.overflowed()) {
    held_ = false;
    fail("cuda graph: an op with more than ", OpSignature::kCapacity,
         " signature words cannot be recorded");
  }
  if (mode_ == Mode::kCapturing) {
    recorded_words_.insert(recorded_words_.end(), op.words(), op.words() + op.size());
    op_ends_.push_back(recorded_words_.size());
    return false;
  }
  const size_t i = replayed_ops_;
  if (i >= op_ends_.size()) mismatch("the step has more ops than the recording");
  const size_t first = i == 0 ? 0 : op_ends_[i - 1];
  if (op_ends_[i] - first != op.size() ||
      !std::equal(op.words(), op.words() + op.size(),
                  recorded_words_.begin() + std::ptrdiff_t(first))) {
    mismatch("an op differs from the recorded one");
  }
  ++replayed_ops_;
  return true;
}

void StepGraph::mismatch(const char* what) {
  held_ = false;
  fail("cuda graph: ", what, " (op ", replayed_ops_, " of ", op_ends_.size(),
       "); the step runs unrecorded");
}

const int64_t* StepGraph::position_slot(int64_t position) {
  if (!recording()) return nullptr;
  if (positions_used_ == kPositionSlots) {
    held_ = false;
    fail("cuda graph: the step needs more than ", kPositionSlots, " positions");
  }
  positions_host_.as<int64_t>()[positions_used_] = position;
  return positions_table_.as<int64_t>() + positions_used_++;
}

size_t StepGraph::reserve_staging(size_t bytes) {
  const size_t offset = staged_;
  const size_t end = offset + (bytes + kStagingAlign - 1) / kStagingAlign * kStagingAlign;
  if (end > staging_.size()) {
    wanted_ = std::max(wanted_, 2 * end);
    held_ = false;  // the next capture brings a larger staging area
    fail("cuda graph: the step needs ", end, " bytes of staging, ", staging_.size(), " held");
  }
  staged_ = end;
  return offset;
}

void StepGraph::stage_upload(void* dst, const void* host, size_t bytes) {
  const size_t offset = reserve_staging(bytes);
  std::memcpy(staging_.as<char>() + offset, host, bytes);
  if (mode_ != Mode::kCapturing) return;  // a replay's graph copies from the same offset
  check(cudaMemcpyAsync(dst, staging_.as<char>() + offset, bytes, cudaMemcpyHostToDevice,
                        as_stream(stream_.handle())),
        "cudaMemcpyAsync (recorded upload)");
}

void StepGraph::stage_download(void* host, const void* src, size_t bytes) {
  const size_t offset = reserve_staging(bytes);
  if (mode_ == Mode::kCapturing) {
    check(cudaMemcpyAsync(staging_.as<char>() + offset, src, bytes, cudaMemcpyDeviceToHost,
                          as_stream(stream_.handle())),
          "cudaMemcpyAsync (recorded download)");
  }
  downloads_.push_back({host, offset, bytes});
}

void StepGraph::direct_download(void* host, const void* src, size_t bytes) {
  if (mode_ != Mode::kCapturing) return;  // a replay's graph copies to the same address
  check(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, as_stream(stream_.handle())),
        "cudaMemcpyAsync (recorded direct download)");
}

void StepGraph::fail_step() noexcept {
  held_ = false;
  if (recording()) step_failed_ = true;
}

void StepGraph::end_and_run() {
  if (recording()) add_since(step_begun_, times_.walk_seconds);
  if (mode_ == Mode::kCapturing) return run_captured();
  if (mode_ != Mode::kReplaying) fail("cuda graph: no step is being recorded");
  if (step_failed_) mismatch("memory was freed during the step");
  if (replayed_ops_ != op_ends_.size()) mismatch("the step has fewer ops than the recording");
  mode_ = Mode::kOff;
  held_ = false;  // held again once the launch succeeded
  launch_and_complete();
  held_ = true;
  ++times_.replayed;
}

void StepGraph::run_captured() {
  const Clock::time_point start = Clock::now();
  mode_ = Mode::kOff;
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(as_stream(stream_.handle()), &graph);
  if (ended != cudaSuccess || step_failed_) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
    downloads_.clear();
    check(ended, "cudaStreamEndCapture");
    fail("cuda graph: memory was freed during the recorded step");
  }
  auto exec = static_cast<cudaGraphExec_t>(exec_);
  if (exec != nullptr) {
    cudaGraphExecUpdateResultInfo info{};
    if (cudaGraphExecUpdate(exec, graph, &info) != cudaSuccess) {
      cudaGetLastError();  // another shape: instantiate anew
      cudaGraphExecDestroy(exec);
      exec = nullptr;
    }
  }
  const cudaError_t made = exec != nullptr ? cudaSuccess : cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  exec_ = exec;
  if (made != cudaSuccess) downloads_.clear();
  check(made, "cudaGraphInstantiate");
  add_since(start, times_.graph_seconds);
  launch_and_complete();
  held_ = true;
  ++times_.captured;
}

void StepGraph::launch_and_complete() {
  const Clock::time_point start = Clock::now();
  const auto exec = static_cast<cudaGraphExec_t>(exec_);
  const cudaError_t launched = cudaGraphLaunch(exec, as_stream(stream_.handle()));
  if (launched != cudaSuccess) downloads_.clear();
  check(launched, "cudaGraphLaunch");
  stream_.synchronize();
  const Clock::time_point ran = add_since(start, times_.run_seconds);
  for (const Download& d : downloads_) {
    std::memcpy(d.host, staging_.as<char>() + d.offset, d.bytes);
  }
  downloads_.clear();
  add_since(ran, times_.download_seconds);
}

void StepGraph::abort() noexcept {
  const Mode mode = mode_;
  mode_ = Mode::kOff;
  held_ = false;
  downloads_.clear();
  if (mode != Mode::kCapturing) return;
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(as_stream(stream_.handle()), &graph);
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaGetLastError();
}

void refuse_growth_while_capturing(void* stream, const char* what) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  check(cudaStreamIsCapturing(as_stream(stream), &status), "cudaStreamIsCapturing");
  if (status != cudaStreamCaptureStatusNone) {
    fail("cuda graph: ", what, " must grow, which a recorded step cannot do; it runs unrecorded");
  }
}

}  // namespace sluice::cuda
