// WeightMirror: device copies of weights the model passes as HOST pointers (the mapped model
// file, the model's float vectors), which Backend allows as long as that memory never changes
// while the backend lives (backend/backend.h). The first use of a host pointer copies `bytes`
// from it to a new device allocation; later uses get the copy back through a hash-map lookup.
// Device (or managed) pointers are passed through as they are. Every pointer is classified once
// with cudaPointerGetAttributes and the answer cached: the same weights come every token, and a
// driver call per op would cost more than a small kernel. Pinned host memory is mirrored too
// (a kernel reading it would cross PCIe on every token).
//
// Not thread-safe (one backend, one caller thread). Plain C++ header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "backend/cuda/cuda_memory.h"

namespace sluice::cuda {

class WeightMirror {
 public:
  // Copies are queued on `stream` (which must outlive the mirror); kernels queued after them on
  // the same stream see the data.
  explicit WeightMirror(const Stream& stream) : stream_(stream) {}

  // The device address of the `bytes` bytes at `p`: p itself when it is device memory (or
  // nullptr, or bytes == 0), else its device copy — made now, or grown when a later call needs
  // more bytes from the same pointer (the old copy is released only after the stream is idle).
  // Throws sluice::Error when device memory runs out.
  const void* resolve(const void* p, uint64_t bytes);
  template <class T>
  const T* resolve(const T* p, uint64_t count) {
    return static_cast<const T*>(resolve(static_cast<const void*>(p), count * sizeof(T)));
  }

  // Bytes of device memory holding weight copies (each host pointer counted once).
  uint64_t mirrored_bytes() const { return mirrored_bytes_; }

 private:
  struct Entry {
    bool device = false;  // the pointer is device memory: used as it is
    DeviceBuffer copy;    // host pointers: the device copy
  };

  const Stream& stream_;
  std::unordered_map<const void*, Entry> entries_;
  uint64_t mirrored_bytes_ = 0;
};

}  // namespace sluice::cuda
