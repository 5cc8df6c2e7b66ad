// CudaBackend (cuda_backend.h): validation and dispatch to the launchers of cuda_ops.h and
// quant_matmul.h, all on the backend's stream.
#include "backend/cuda/cuda_backend.h"

#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/quant_matmul.h"

namespace sluice::cuda {
namespace {

// Selects `device` before the members (the stream) are created on it.
int select_device(int device) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) fail("cuda: no CUDA device present");
  if (device < 0 || device >= count) fail("cuda: no device ", device, " (", count, " present)");
  check(cudaSetDevice(device), "cudaSetDevice");
  return device;
}

}  // namespace

CudaBackend::CudaBackend(int device) : device_(select_device(device)) {
  multiprocessors_ = multiprocessor_count();
  max_shared_bytes_ = max_shared_memory_per_block();
}

void CudaBackend::matmul(const MatrixView& w, const float* x, float* y, int64_t n_tokens) {
  std::string error;
  if (!cuda::matmul(w.type, w.data, w.n_rows, w.n_cols, x, y, n_tokens, stream_.handle(), &error)) {
    fail(error);
  }
}

void CudaBackend::get_rows(const MatrixView& table, const int32_t* ids, int64_t n, float* out) {
  std::string error;
  if (!cuda::get_rows(table.type, table.data, table.n_cols, ids, n, out, stream_.handle(),
                      &error)) {
    fail(error);
  }
}

void CudaBackend::rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n,
                           float eps) {
  launch_rms_norm(x, weight, y, n_rows, n, eps, as_stream(stream_.handle()));
}

void CudaBackend::rope(float* x, int64_t n_tokens, int64_t n_head, int64_t head_dim, int64_t pos0,
                       const RopeConfig& config) {
  launch_rope(x, n_tokens, n_head, head_dim, pos0, config, as_stream(stream_.handle()));
}

void CudaBackend::kv_store(const KvLayerView& kv, const float* k, const float* v, int64_t n_tokens,
                           int64_t pos0) {
  launch_kv_store(kv, k, v, n_tokens, pos0, as_stream(stream_.handle()));
}

void CudaBackend::attention(const AttentionCall& call) {
  launch_attention(call, AttentionDevice{multiprocessors_, max_shared_bytes_}, attention_scratch_,
                   as_stream(stream_.handle()));
}

void CudaBackend::glu(GluActivation act, float* gate, const float* up, int64_t n_rows,
                      int64_t n_cols) {
  if (act == GluActivation::kGeluTanhF16 && gelu_f16_table_.size() == 0) {
    std::vector<uint16_t> table(65536);
    make_gelu_f16_table(table.data());
    DeviceBuffer device_table(table.size() * sizeof(uint16_t));
    copy_to_device(device_table.data(), table.data(), table.size() * sizeof(uint16_t), stream_);
    stream_.synchronize();  // once: `table` dies here
    gelu_f16_table_ = std::move(device_table);
  }
  launch_glu(act, gate, up, n_rows, n_cols, gelu_f16_table_.as<const uint16_t>(),
             as_stream(stream_.handle()));
}

void CudaBackend::mul_sigmoid(float* x, const float* gate, int64_t n) {
  launch_mul_sigmoid(x, gate, n, as_stream(stream_.handle()));
}

void CudaBackend::add(float* y, const float* x, int64_t n) {
  launch_add(y, x, n, as_stream(stream_.handle()));
}

void CudaBackend::add_bias(float* x, const float* bias, int64_t n_rows, int64_t n_cols) {
  launch_add_bias(x, bias, n_rows, n_cols, as_stream(stream_.handle()));
}

void CudaBackend::scale(float* x, float factor, int64_t n) {
  launch_scale(x, factor, n, as_stream(stream_.handle()));
}

void CudaBackend::softcap(float* x, float cap, int64_t n) {
  launch_softcap(x, cap, n, as_stream(stream_.handle()));
}

void CudaBackend::softmax_rows(float* x, int64_t n_rows, int64_t n_cols) {
  launch_softmax_rows(x, n_rows, n_cols, as_stream(stream_.handle()));
}

}  // namespace sluice::cuda
