// StepGraph (cuda_step_graph.h): record, update or instantiate, replay.
#include "backend/cuda/cuda_step_graph.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_check.h"
#include "core/error.h"

namespace sluice::cuda {
namespace {

constexpr size_t kStagingAlign = 256;

}  // namespace

StepGraph::~StepGraph() {
  abort();
  if (exec_ != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
}

void StepGraph::begin() {
  if (staging_.size() < wanted_) staging_ = PinnedBuffer(wanted_);
  staged_ = 0;
  downloads_.clear();
  // Relaxed: allocations a step makes the first time it meets a size (scratch growth) are
  // allowed while recording; anything that would wait for the device invalidates the recording
  // and the caller runs the step again unrecorded.
  check(cudaStreamBeginCapture(as_stream(stream_.handle()), cudaStreamCaptureModeRelaxed),
        "cudaStreamBeginCapture");
  recording_ = true;
}

size_t StepGraph::reserve_staging(size_t bytes) {
  const size_t offset = staged_;
  const size_t end = offset + (bytes + kStagingAlign - 1) / kStagingAlign * kStagingAlign;
  if (end > staging_.size()) {
    wanted_ = std::max(wanted_, 2 * end);
    fail("cuda graph: the step needs ", end, " bytes of staging, ", staging_.size(), " held");
  }
  staged_ = end;
  return offset;
}

void StepGraph::stage_upload(void* dst, const void* host, size_t bytes) {
  const size_t offset = reserve_staging(bytes);
  std::memcpy(staging_.as<char>() + offset, host, bytes);
  check(cudaMemcpyAsync(dst, staging_.as<char>() + offset, bytes, cudaMemcpyHostToDevice,
                        as_stream(stream_.handle())),
        "cudaMemcpyAsync (recorded upload)");
}

void StepGraph::stage_download(void* host, const void* src, size_t bytes) {
  const size_t offset = reserve_staging(bytes);
  check(cudaMemcpyAsync(staging_.as<char>() + offset, src, bytes, cudaMemcpyDeviceToHost,
                        as_stream(stream_.handle())),
        "cudaMemcpyAsync (recorded download)");
  downloads_.push_back({host, offset, bytes});
}

void StepGraph::end_and_run() {
  recording_ = false;
  cudaGraph_t graph = nullptr;
  check(cudaStreamEndCapture(as_stream(stream_.handle()), &graph), "cudaStreamEndCapture");
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
  check(made, "cudaGraphInstantiate");
  check(cudaGraphLaunch(exec, as_stream(stream_.handle())), "cudaGraphLaunch");
  stream_.synchronize();
  ++replays_;
  for (const Download& d : downloads_) {
    std::memcpy(d.host, staging_.as<char>() + d.offset, d.bytes);
  }
  downloads_.clear();
}

void StepGraph::abort() noexcept {
  if (!recording_) return;
  recording_ = false;
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(as_stream(stream_.handle()), &graph);
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaGetLastError();
  downloads_.clear();
}

}  // namespace sluice::cuda
