// Stream, Event, DeviceBuffer, PinnedBuffer and the copies of cuda_memory.h.
#include "backend/cuda/cuda_memory.h"

#include <utility>

#include "backend/cuda/cuda_check.h"

namespace sluice::cuda {

Stream::Stream() {
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  handle_ = stream;
}

Stream::~Stream() {
  if (handle_ != nullptr) cudaStreamDestroy(as_stream(handle_));
}

void Stream::synchronize() const {
  check(cudaStreamSynchronize(as_stream(handle_)), "stream synchronize");
}

Event::Event() {
  cudaEvent_t event = nullptr;
  check(cudaEventCreate(&event), "cudaEventCreate");
  handle_ = event;
}

Event::~Event() {
  if (handle_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
}

void Event::record(const Stream& stream) {
  check(cudaEventRecord(static_cast<cudaEvent_t>(handle_), as_stream(stream.handle())),
        "cudaEventRecord");
}

void Event::wait_on(const Stream& stream) const {
  check(cudaStreamWaitEvent(as_stream(stream.handle()), static_cast<cudaEvent_t>(handle_), 0),
        "cudaStreamWaitEvent");
}

void Event::synchronize() const {
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_)), "cudaEventSynchronize");
}

float Event::elapsed_ms_since(const Event& start) const {
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.handle_),
                             static_cast<cudaEvent_t>(handle_)),
        "cudaEventElapsedTime");
  return ms;
}

DeviceBuffer::DeviceBuffer(size_t bytes) {
  reserve(bytes);
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::reserve(size_t bytes) {
  if (bytes <= bytes_) return;
  if (data_ != nullptr) {
    // cudaFree waits for the device, so work still reading the old allocation finishes first.
    cudaFree(data_);
    data_ = nullptr;
    bytes_ = 0;
  }
  check_allocation(cudaMalloc(&data_, bytes), bytes);
  bytes_ = bytes;
}

PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes) {
  check(cudaMallocHost(&data_, bytes), "cudaMallocHost");
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) cudaFreeHost(data_);
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFreeHost(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void copy_to_device(void* device_dst, const void* host_src, size_t bytes, const Stream& stream) {
  check(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice,
                        as_stream(stream.handle())),
        "copy to device");
}

void copy_to_host(void* host_dst, const void* device_src, size_t bytes, const Stream& stream) {
  check(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost,
                        as_stream(stream.handle())),
        "copy to host");
}

void copy_on_device(void* device_dst, const void* device_src, size_t bytes, const Stream& stream) {
  check(cudaMemcpyAsync(device_dst, device_src, bytes, cudaMemcpyDeviceToDevice,
                        as_stream(stream.handle())),
        "copy on device");
}

void copy_rows_to_device(void* device_dst, size_t dst_pitch, const void* host_src, size_t src_pitch,
                         size_t row_bytes, size_t n_rows, const Stream& stream) {
  check(cudaMemcpy2DAsync(device_dst, dst_pitch, host_src, src_pitch, row_bytes, n_rows,
                          cudaMemcpyHostToDevice, as_stream(stream.handle())),
        "copy rows to device");
}

void copy_rows_on_device(void* device_dst, size_t dst_pitch, const void* device_src,
                         size_t src_pitch, size_t row_bytes, size_t n_rows, const Stream& stream) {
  check(cudaMemcpy2DAsync(device_dst, dst_pitch, device_src, src_pitch, row_bytes, n_rows,
                          cudaMemcpyDeviceToDevice, as_stream(stream.handle())),
        "copy rows on device");
}

void fill_bytes(void* device_dst, uint8_t value, size_t bytes, const Stream& stream) {
  check(cudaMemsetAsync(device_dst, value, bytes, as_stream(stream.handle())), "cudaMemsetAsync");
}

int multiprocessor_count() {
  int device = 0;
  int count = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device),
        "multiprocessor count");
  return count;
}

size_t max_copy_pitch() {
  int device = 0;
  int pitch = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&pitch, cudaDevAttrMaxPitch, device), "maximum pitch");
  return size_t(pitch);
}

size_t max_shared_memory_per_block() {
  int device = 0;
  int bytes = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
        "shared memory per block");
  return size_t(bytes);
}

}  // namespace sluice::cuda
