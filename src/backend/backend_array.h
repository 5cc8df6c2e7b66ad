// BackendArray: an array of T in a Backend's memory (backend.h) — the activations, scratch and
// KV cells a forward works in, on the host for the CPU backend and on the device for a GPU one.
// Move-only; released with the array. Nothing here reads or writes the elements: that is the
// backend's ops' job (or, on a host-memory backend, the caller's).
#pragma once

#include <cstddef>
#include <utility>

#include "backend/backend.h"

namespace sluice {

template <class T>
class BackendArray {
 public:
  BackendArray() = default;
  BackendArray(Backend& backend, size_t n) { resize(backend, n); }
  BackendArray(const BackendArray&) = delete;
  BackendArray& operator=(const BackendArray&) = delete;
  BackendArray(BackendArray&& other) noexcept { swap(other); }
  BackendArray& operator=(BackendArray&& other) noexcept {
    BackendArray(std::move(other)).swap(*this);
    return *this;
  }
  ~BackendArray() { reset(); }

  // Afterwards holds n elements of `backend`'s memory. A new size or another backend means new,
  // zeroed memory (the old contents are not kept); the same size on the same backend keeps them.
  void resize(Backend& backend, size_t n) {
    if (backend_ == &backend && size_ == n) return;
    reset();
    data_ = static_cast<T*>(backend.allocate(n * sizeof(T)));
    backend_ = &backend;
    size_ = n;
  }
  void reset() noexcept {
    if (backend_ != nullptr) backend_->deallocate(data_);
    backend_ = nullptr;
    data_ = nullptr;
    size_ = 0;
  }
  void swap(BackendArray& other) noexcept {
    std::swap(backend_, other.backend_);
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  Backend* backend() const { return backend_; }

 private:
  Backend* backend_ = nullptr;
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace sluice
