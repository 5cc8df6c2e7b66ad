// StepGraph: one forward step recorded as a CUDA graph and replayed as a unit. A decode step
// launches hundreds of small kernels, and launching them one by one costs the host more time
// than they take on the GPU; a graph launch costs about one. Every step is recorded anew (the
// positions and cache lengths in the kernels' arguments change) and the instantiated graph is
// updated in place while its shape stays the same, as llama.cpp does. While recording, uploads
// take their bytes at once into a pinned staging area and downloads land there, copied to their
// host destinations after the replay. Plain C++ header.
#pragma once

#include <cstddef>
#include <vector>

#include "backend/cuda/cuda_memory.h"

namespace sluice::cuda {

class StepGraph {
 public:
  explicit StepGraph(const Stream& stream) : stream_(stream) {}
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  bool recording() const { return recording_; }
  // Starts recording the stream's work.
  void begin();
  // While recording: an upload whose host bytes are copied into the staging area now, and a
  // download completed by end_and_run. Throw sluice::Error when the staging area is full (the
  // next begin() makes it as large as this step needed).
  void stage_upload(void* dst, const void* host, size_t bytes);
  void stage_download(void* host, const void* src, size_t bytes);
  // Ends the recording, replays it, waits for it and completes the downloads. Throws when the
  // recording was invalidated by an operation a graph cannot hold.
  void end_and_run();
  // Ends a recording that failed and drops it; the stream is usable again.
  void abort() noexcept;
  uint64_t replays() const { return replays_; }

 private:
  size_t reserve_staging(size_t bytes);  // offset of `bytes` in the staging area

  struct Download {
    void* host;
    size_t offset;
    size_t bytes;
  };
  const Stream& stream_;
  PinnedBuffer staging_;
  size_t staged_ = 0;                // bytes of the staging area this step uses
  size_t wanted_ = size_t(1) << 20;  // size the next begin() gives the staging area
  std::vector<Download> downloads_;
  void* exec_ = nullptr;  // cudaGraphExec_t
  bool recording_ = false;
  uint64_t replays_ = 0;
};

}  // namespace sluice::cuda
