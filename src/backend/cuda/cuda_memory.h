// Device memory, pinned host memory, streams and events of the CUDA backend as plain C++ (no
// CUDA headers), so tests and later model wiring can hold them. Every failure throws
// sluice::Error with CUDA's message; destructors never throw (they drop errors).
#pragma once

#include <cstddef>
#include <cstdint>

namespace sluice::cuda {

// A CUDA stream (non-blocking with respect to the legacy default stream).
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  void* handle() const { return handle_; }  // a cudaStream_t
  void synchronize() const;                 // waits for all work queued so far; throws its error

 private:
  void* handle_ = nullptr;
};

// An event recorded on a stream: ordering between streams and timing.
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(const Stream& stream);
  void wait_on(const Stream& stream) const;  // later work on `stream` waits for this event
  void synchronize() const;
  // Milliseconds from `start` to this event (both recorded and complete).
  float elapsed_ms_since(const Event& start) const;

 private:
  void* handle_ = nullptr;
};

// Owning device allocation (cudaMalloc). Move-only; empty when default-constructed.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t size() const { return bytes_; }
  // Makes room for at least `bytes`, dropping the contents when it must reallocate.
  void reserve(size_t bytes);

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Owning page-locked host allocation (cudaMallocHost): the source/target of asynchronous copies.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() const { return data_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t size() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Copies queued on `stream`. From or to pageable host memory CUDA stages the copy, so the host
// buffer may be reused once the call returns for host -> device; for device -> host synchronize
// the stream before reading the result.
void copy_to_device(void* device_dst, const void* host_src, size_t bytes, const Stream& stream);
void copy_to_host(void* host_dst, const void* device_src, size_t bytes, const Stream& stream);
void copy_on_device(void* device_dst, const void* device_src, size_t bytes, const Stream& stream);
// n_rows rows of row_bytes, each at its own pitch (cudaMemcpy2DAsync): host -> device, within
// the device.
void copy_rows_to_device(void* device_dst, size_t dst_pitch, const void* host_src, size_t src_pitch,
                         size_t row_bytes, size_t n_rows, const Stream& stream);
void copy_rows_on_device(void* device_dst, size_t dst_pitch, const void* device_src,
                         size_t src_pitch, size_t row_bytes, size_t n_rows, const Stream& stream);
// Sets `bytes` bytes to `value` (0xff makes every float a NaN: the tests' poison).
void fill_bytes(void* device_dst, uint8_t value, size_t bytes, const Stream& stream);

// Multiprocessor count, the largest dynamic shared memory a block may opt in to and the largest
// pitch of a copy of rows, of the current device.
int multiprocessor_count();
size_t max_shared_memory_per_block();
size_t max_copy_pitch();

}  // namespace sluice::cuda
