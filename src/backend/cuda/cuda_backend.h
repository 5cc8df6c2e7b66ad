// CudaBackend: the Backend interface (backend/backend.h) on an NVIDIA GPU. Every pointer it is
// given is a device pointer (weights, activations, KV cells, norm weights, freq_factors, sinks);
// every op only enqueues kernels on the backend's own stream — no host round trips — so results
// are ready after synchronize() (or any later stream-ordered copy). Errors, including a kernel's
// fault reported at the next synchronisation, throw sluice::Error with CUDA's one-line message.
//
// Element-wise ops, norms, RoPE and KV writes reproduce CpuBackend's float operations (bit for
// bit, or within 1 ulp where the CPU calls libm); attention and the quantized matmuls agree with
// it within the tolerances stated in tests/backend/cuda_backend_test.cpp. Plain C++ header.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "backend/cuda/cuda_memory.h"

namespace sluice::cuda {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device = 0);  // throws when there is no such device

  void matmul(const MatrixView& w, const float* x, float* y, int64_t n_tokens) override;
  void get_rows(const MatrixView& table, const int32_t* ids, int64_t n, float* out) override;
  void rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n,
                float eps) override;
  void rope(float* x, int64_t n_tokens, int64_t n_head, int64_t head_dim, int64_t pos0,
            const RopeConfig& config) override;
  void kv_store(const KvLayerView& kv, const float* k, const float* v, int64_t n_tokens,
                int64_t pos0) override;
  void attention(const AttentionCall& call) override;
  void glu(GluActivation act, float* gate, const float* up, int64_t n_rows,
           int64_t n_cols) override;
  void mul_sigmoid(float* x, const float* gate, int64_t n) override;
  void add(float* y, const float* x, int64_t n) override;
  void add_bias(float* x, const float* bias, int64_t n_rows, int64_t n_cols) override;
  void scale(float* x, float factor, int64_t n) override;
  void softcap(float* x, float cap, int64_t n) override;
  void softmax_rows(float* x, int64_t n_rows, int64_t n_cols) override;

  // Waits until every op queued so far has run; throws the first error any of them hit.
  void synchronize() const { stream_.synchronize(); }
  const Stream& stream() const { return stream_; }

 private:
  int device_ = 0;
  int multiprocessors_ = 1;
  size_t max_shared_bytes_ = 0;
  Stream stream_;
  DeviceBuffer attention_scratch_;  // split-K partial results
  DeviceBuffer gelu_f16_table_;     // [65536] halves, uploaded on first use of kGeluTanhF16
};

}  // namespace sluice::cuda
