// CpuBackend's memory (the host's own) and the MoE row moves. weighted_sum keeps the float steps
// of llama.cpp's CPU combine: each product rounded, then added in choice order — the translation
// unit is built with -ffp-contract=off, so nothing fuses.
#include <cstdlib>
#include <cstring>
#include <new>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace sluice::cpu {

void CpuBackend::gather_rows(const float* src, const int32_t* rows, int64_t n, int64_t n_cols,
                             float* dst) {
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(dst + i * n_cols, src + int64_t(rows[i]) * n_cols, size_t(n_cols) * sizeof(float));
  }
}

void CpuBackend::scatter_rows(const float* src, const int32_t* rows, int64_t n, int64_t n_cols,
                              float* dst) {
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(dst + int64_t(rows[i]) * n_cols, src + i * n_cols, size_t(n_cols) * sizeof(float));
  }
}

void CpuBackend::weighted_sum(const float* y, const float* weights, int64_t n_tokens, int64_t k,
                              int64_t n, float* out) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    float* dst = out + t * n;
    for (int64_t c = 0; c < k; ++c) {
      const float weight = weights[t * k + c];
      const float* row = y + (t * k + c) * n;
      if (c == 0) {
        for (int64_t i = 0; i < n; ++i) dst[i] = row[i] * weight;
      } else {
        for (int64_t i = 0; i < n; ++i) dst[i] += row[i] * weight;
      }
    }
  }
}

void* CpuBackend::allocate(size_t bytes) {
  constexpr size_t kAlign = 64;
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
  if (p == nullptr) fail("out of memory allocating ", bytes, " bytes");
  std::memset(p, 0, rounded == 0 ? kAlign : rounded);
  return p;
}

void CpuBackend::deallocate(void* p) noexcept {
  std::free(p);
}

void CpuBackend::upload(void* dst, const void* host, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, host, bytes);
}

void CpuBackend::download(void* host, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(host, src, bytes);
}

void CpuBackend::copy(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

void CpuBackend::copy_strided_rows(const float* src, int64_t src_stride, float* dst,
                                   int64_t dst_stride, int64_t n_rows, int64_t n_cols) {
  if (n_cols <= 0) return;
  for (int64_t r = 0; r < n_rows; ++r) {
    std::memcpy(dst + r * dst_stride, src + r * src_stride, size_t(n_cols) * sizeof(float));
  }
}

}  // namespace sluice::cpu
