// Scratch memory for the quantized activations of the int8 decode path (quant_int8_matvec.cuh),
// kept per (device, stream) and grown on demand. Work on one stream runs in order, so a stream
// can reuse its buffer call after call; a larger request frees the old buffer stream-ordered
// (after the work already enqueued that reads it) and allocates a new one. Allocating per call
// (cudaMallocAsync / cudaFreeAsync) cost more host time than a 4096 x 4096 Q4_K matvec takes.
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cuda/quant_kernel_set.h"

namespace sluice::cuda::quant {
namespace {

struct Scratch {
  int device;
  void* stream;
  void* data;
  int64_t bytes;
};

}  // namespace

bool activation_scratch(void* stream, int64_t bytes, void** out, std::string* error) {
  static std::mutex mutex;
  static std::vector<Scratch> buffers;  // never freed: a few hundred KiB per stream at most
  int device = 0;
  cudaError_t status = cudaGetDevice(&device);
  const auto fail = [&](const char* what) {
    if (error)
      *error = std::string("cuda matmul: activation scratch: ") + what + ": " +
               cudaGetErrorString(status);
    return false;
  };
  if (status != cudaSuccess) return fail("cudaGetDevice");
  std::lock_guard<std::mutex> lock(mutex);
  Scratch* slot = nullptr;
  for (Scratch& s : buffers) {
    if (s.device == device && s.stream == stream) slot = &s;
  }
  if (!slot) {
    buffers.push_back({device, stream, nullptr, 0});
    slot = &buffers.back();
  }
  if (slot->bytes < bytes) {
    const auto s = static_cast<cudaStream_t>(stream);
    // An allocation made while the stream is being captured would belong to the graph, not
    // to this cache: refuse, the caller runs the call once before capturing.
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    status = cudaStreamIsCapturing(s, &capture);
    if (status != cudaSuccess) return fail("cudaStreamIsCapturing");
    if (capture != cudaStreamCaptureStatusNone) {
      if (error) {
        *error =
            "cuda matmul: activation scratch must grow while the stream is captured; run "
            "the call once before capturing";
      }
      return false;
    }
    if (slot->data) {
      status = cudaFreeAsync(slot->data, s);
      slot->data = nullptr, slot->bytes = 0;
      if (status != cudaSuccess) return fail("cudaFreeAsync");
    }
    const int64_t grown = bytes < (int64_t(1) << 16) ? (int64_t(1) << 16) : bytes;
    status = cudaMallocAsync(&slot->data, size_t(grown), s);
    if (status != cudaSuccess) return fail("cudaMallocAsync");
    slot->bytes = grown;
  }
  *out = slot->data;
  return true;
}

}  // namespace sluice::cuda::quant
