// Prefill products through cuBLAS (quant_kernel_set.h, matmul_by_cublas). The tile kernel of
// quant_kernels.cuh decodes each 128 x 64 weight tile once per 64 tokens and is bound by that
// integer work and its load latency (ncu on the H200: 58% issue slots, 24% occupancy, ~70
// TFLOP/s); a long chunk instead has its weight decoded once, in row chunks, to f16 and
// multiplied by cuBLAS's tensor-core GEMM. Operands are the tile path's (the same f16 weights,
// activations rounded to f16 the same way), accumulation in float: only the order of the sums
// differs. State per (device, stream): the cuBLAS handle bound to the stream and two grow-only
// f16 scratch buffers, freed stream-ordered when they must grow.
//
// libcublas is opened on first use (dlopen), not linked: linked, it cost every sluice process
// 0.14 s and 220 MB of RSS at start (libcublasLt's relocations), prefill or not. When it cannot
// be opened the tile kernels serve every prefill (cublas_loaded() false).
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cuda/quant_kernel_set.h"

namespace sluice::cuda::quant {
namespace {

// Elements of one dequantized row chunk (64 MiB of f16): a 14336 x 4096 matrix goes in two.
constexpr int64_t kChunkElems = int64_t(32) << 20;

struct StreamState {
  int device = 0;
  void* stream = nullptr;
  cublasHandle_t handle = nullptr;
  void* weights = nullptr;  // __half [chunk rows, n_cols]
  int64_t weight_bytes = 0;
  void* activations = nullptr;  // __half [n_tokens, n_cols]
  int64_t activation_bytes = 0;
};

__global__ void to_half_kernel(const float* __restrict__ x, int64_t n, __half* __restrict__ out) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = __float2half_rn(x[i]);  // as the tile kernel rounds its activation tile
  }
}

// The five entry points used, from the library of the toolkit built against: its soname through
// the loader's search path first, then in the toolkit's directory CMake found, then the usual one.
struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  // Spelled out: the header overloads cublasGemmEx for C++ (the library exports the C one).
  cublasStatus_t (*gemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                         const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                         int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                         cublasGemmAlgo_t) = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

const CublasApi* load_cublas() {
  const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  void* library = nullptr;
  for (const std::string& name :
       {soname, std::string(SLUICE_CUBLAS_DIR) + "/" + soname, "/usr/local/cuda/lib64/" + soname}) {
    library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library) break;
  }
  if (!library) return nullptr;
  static CublasApi api;
  api.create = reinterpret_cast<decltype(api.create)>(dlsym(library, "cublasCreate_v2"));
  api.destroy = reinterpret_cast<decltype(api.destroy)>(dlsym(library, "cublasDestroy_v2"));
  api.set_stream = reinterpret_cast<decltype(api.set_stream)>(dlsym(library, "cublasSetStream_v2"));
  api.gemm = reinterpret_cast<decltype(api.gemm)>(dlsym(library, "cublasGemmEx"));
  api.status_string =
      reinterpret_cast<decltype(api.status_string)>(dlsym(library, "cublasGetStatusString"));
  if (!api.create || !api.destroy || !api.set_stream || !api.gemm || !api.status_string) {
    return nullptr;
  }
  return &api;
}

const CublasApi* cublas() {
  static const CublasApi* api = load_cublas();
  return api;
}

bool cuda_failed(cudaError_t status, const char* what, std::string* error) {
  if (status == cudaSuccess) return false;
  if (error)
    *error = std::string("cuda matmul (cuBLAS path): ") + what + ": " + cudaGetErrorString(status);
  return true;
}

bool cublas_failed(cublasStatus_t status, const char* what, std::string* error) {
  if (status == CUBLAS_STATUS_SUCCESS) return false;
  if (error) *error = std::string("cuda matmul: ") + what + ": " + cublas()->status_string(status);
  return true;
}

// Grows `buffer` to `bytes` on the stream (the old one freed after the work that reads it).
bool ensure(void** buffer, int64_t* have, int64_t bytes, cudaStream_t stream, std::string* error) {
  if (*have >= bytes) return true;
  if (*buffer && cuda_failed(cudaFreeAsync(*buffer, stream), "cudaFreeAsync", error)) return false;
  *buffer = nullptr, *have = 0;
  if (cuda_failed(cudaMallocAsync(buffer, size_t(bytes), stream), "cudaMallocAsync", error)) {
    return false;
  }
  *have = bytes;
  return true;
}

StreamState* state_of(void* stream, std::string* error) {
  static std::mutex mutex;
  static std::vector<StreamState> states;  // one per stream that ran a long prefill; never freed
  int device = 0;
  if (cuda_failed(cudaGetDevice(&device), "cudaGetDevice", error)) return nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  for (StreamState& s : states) {
    if (s.device == device && s.stream == stream) return &s;
  }
  StreamState s;
  s.device = device;
  s.stream = stream;
  if (cublas_failed(cublas()->create(&s.handle), "cublasCreate", error)) return nullptr;
  if (cublas_failed(cublas()->set_stream(s.handle, static_cast<cudaStream_t>(stream)),
                    "cublasSetStream", error)) {
    cublas()->destroy(s.handle);
    return nullptr;
  }
  states.push_back(s);
  return &states.back();
}

}  // namespace

bool cublas_loaded() {
  return cublas() != nullptr;
}

bool matmul_by_cublas(const KernelSet& set, const MatmulArgs& a, std::string* error) {
  const auto stream = static_cast<cudaStream_t>(a.stream);
  StreamState* s = state_of(a.stream, error);
  if (!s) return false;
  const int64_t chunk_rows =
      std::min<int64_t>({a.n_rows, std::max<int64_t>(1, kChunkElems / a.n_cols), 65535});
  if (!ensure(&s->weights, &s->weight_bytes, chunk_rows * a.n_cols * 2, stream, error) ||
      !ensure(&s->activations, &s->activation_bytes, a.n_tokens * a.n_cols * 2, stream, error)) {
    return false;
  }
  const int64_t n_x = a.n_tokens * a.n_cols;
  const int blocks = int(std::min<int64_t>((n_x + 255) / 256, 8192));
  to_half_kernel<<<blocks, 256, 0, stream>>>(a.x, n_x, static_cast<__half*>(s->activations));
  if (cuda_failed(cudaGetLastError(), "to_half", error)) return false;
  const float one = 1.0f, zero = 0.0f;
  for (int64_t row0 = 0; row0 < a.n_rows; row0 += chunk_rows) {
    const int64_t rows = std::min(chunk_rows, a.n_rows - row0);
    const DequantizeArgs d{static_cast<const uint8_t*>(a.w) + row0 * a.row_bytes,
                           rows,
                           a.n_cols,
                           a.row_bytes,
                           s->weights,
                           a.stream};
    if (!set.dequantize_half(d, error)) return false;
    // Column-major view: C [rows, n_tokens] (ldc n_rows, from row row0 of y's rows) =
    // W16ᵀ [rows, n_cols] · X16 [n_cols, n_tokens].
    const cublasStatus_t status = cublas()->gemm(
        s->handle, CUBLAS_OP_T, CUBLAS_OP_N, int(rows), int(a.n_tokens), int(a.n_cols), &one,
        s->weights, CUDA_R_16F, int(a.n_cols), s->activations, CUDA_R_16F, int(a.n_cols), &zero,
        a.y + row0, CUDA_R_32F, int(a.n_rows), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (cublas_failed(status, "cublasGemmEx", error)) return false;
  }
  return true;
}

}  // namespace sluice::cuda::quant
