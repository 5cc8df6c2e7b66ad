// WeightMirror (cuda_weight_mirror.h): classify a pointer once, copy host weights on first use.
#include "backend/cuda/cuda_weight_mirror.h"

#include <utility>

#include "backend/cuda/cuda_check.h"
#include "core/error.h"

namespace sluice::cuda {
namespace {

// Device or managed memory a kernel may read as it is. Plain host memory is
// cudaMemoryTypeUnregistered without an error since CUDA 11; an error (an older driver's answer
// for such memory) also means host, and is cleared so that no later check reports it.
bool is_device_memory(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

}  // namespace

const void* WeightMirror::resolve(const void* p, uint64_t bytes) {
  if (p == nullptr || bytes == 0) return p;
  auto found = entries_.find(p);
  if (found == entries_.end()) {
    Entry entry;
    entry.device = is_device_memory(p);
    found = entries_.emplace(p, std::move(entry)).first;
  }
  Entry& entry = found->second;
  if (entry.device) return p;
  if (entry.copy.size() < bytes) {
    // A copy made while the stream is being recorded into a graph would only happen when (and
    // if) the graph runs: refuse, so the caller runs the step unrecorded.
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    check(cudaStreamIsCapturing(static_cast<cudaStream_t>(stream_.handle()), &capturing),
          "cudaStreamIsCapturing");
    if (capturing != cudaStreamCaptureStatusNone) fail("cuda: a weight first seen while recording");
    const uint64_t old_bytes = entry.copy.size();
    if (old_bytes != 0) {
      // Kernels queued earlier may still read the smaller copy: let them finish before it goes.
      stream_.synchronize();
      entry.copy = DeviceBuffer();
      mirrored_bytes_ -= old_bytes;
    }
    DeviceBuffer copy(bytes);
    // From pageable (mapped) memory the copy is staged before the call returns; kernels queued
    // after it on the stream see the data.
    copy_to_device(copy.data(), p, bytes, stream_);
    entry.copy = std::move(copy);
    mirrored_bytes_ += bytes;
  }
  return entry.copy.data();
}

}  // namespace sluice::cuda
