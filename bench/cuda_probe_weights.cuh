// What the decode-roofline probes (cuda_layer_probe.cu, cuda_stream_probe.cu) share: the 128
// Q4_K products of a Llama-3.1-8B decode step (q+k+v 6144 x 4096, o 4096 x 4096, gate+up
// 28672 x 4096, down 4096 x 14336 per layer, 32 layers: 3.93 GB of random weights), one
// token's quantized activations for each width, a one-block kernel standing for the small
// operations between two products, and the device-to-device copy rate the roofline is measured
// against (bytes read + written, as bench/cuda_vs_llamacpp.py counts it).
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend/cuda/quant_int8_matvec.cuh"

namespace probe {

using namespace sluice::cuda;
using namespace sluice::cuda::quant;
constexpr sluice::QType kType = sluice::QType::Q4_K;
constexpr int kLayers = 32, kProducts = 4;
constexpr int64_t kRows[kProducts] = {6144, 4096, 28672, 4096};
constexpr int64_t kCols[kProducts] = {4096, 4096, 4096, 14336};

inline void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

__global__ void fill_random(uint32_t* p, int64_t n, uint32_t seed) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 2654435761u ^ seed;
    x ^= x >> 15, x *= 2246822519u, x ^= x >> 13;
    p[i] = x & 0x3bff3bffu;  // keeps every f16 scale finite
  }
}

__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// What a decode step runs between two products: one block that waits for the product, lets the
// next kernel launch, then either spins for spin_ns or reads the product's 4096 outputs, sums
// their squares and writes them scaled (a norm's shape).
__global__ void __launch_bounds__(256)
    small_kernel(const float* x, float* out, int64_t spin_ns, uint64_t* stamps) {
  wait_for_prerequisite();
  allow_dependent_launch();
  if (stamps != nullptr && threadIdx.x == 0) stamps[0] = now_ns();
  if (spin_ns > 0) {
    const uint64_t t0 = now_ns();
    while (now_ns() - t0 < uint64_t(spin_ns)) {
    }
    if (stamps != nullptr && threadIdx.x == 0) stamps[1] = now_ns();
    return;
  }
  __shared__ float partial[8];
  float v[16], ss = 0.0f;
  for (int j = 0; j < 16; ++j) v[j] = x[threadIdx.x + 256 * j], ss += v[j] * v[j];
  for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = ss;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < 8; ++w) total += partial[w];
  const float r = rsqrtf(total / 4096.0f + 1e-5f);
  for (int j = 0; j < 16; ++j) out[threadIdx.x + 256 * j] = v[j] * r;
}

// One product of the step: its weights, its output, the activations it reads.
struct Matrix {
  const uint8_t* w;
  float* y;
  int64_t n_rows, n_cols, row_bytes;
  QuantizedRows q;
};

// Every product of the step in order (layer by layer: q+k+v, o, gate+up, down).
inline std::vector<Matrix> make_step(int64_t* weight_bytes) {
  void* act[2];
  for (int a = 0; a < 2; ++a) {
    const int64_t cols = a == 0 ? 4096 : 14336;
    const int64_t bytes = quantized_rows_bytes(1, cols, 256);
    check(cudaMalloc(&act[a], bytes), "activations");
    fill_random<<<256, 256>>>(static_cast<uint32_t*>(act[a]), bytes / 4, 7u + a);
  }
  std::vector<Matrix> step;
  *weight_bytes = 0;
  for (int l = 0; l < kLayers; ++l) {
    for (int i = 0; i < kProducts; ++i) {
      Matrix m{};
      m.n_rows = kRows[i], m.n_cols = kCols[i], m.row_bytes = kCols[i] / 256 * 144;
      void* w = nullptr;
      void* y = nullptr;
      check(cudaMalloc(&w, m.n_rows * m.row_bytes), "weights");
      check(cudaMalloc(&y, m.n_rows * sizeof(float)), "outputs");
      fill_random<<<1024, 256>>>(static_cast<uint32_t*>(w), m.n_rows * m.row_bytes / 4,
                                 uint32_t(l * 8 + i));
      m.w = static_cast<const uint8_t*>(w), m.y = static_cast<float*>(y);
      m.q = split_scratch(act[kCols[i] == 4096 ? 0 : 1], 1, m.n_cols, 256);
      *weight_bytes += m.n_rows * m.row_bytes;
      step.push_back(m);
    }
  }
  check(cudaDeviceSynchronize(), "setup");
  return step;
}

// The probes' one optional argument, the step count (default 20); exits with a usage line on
// anything else.
inline int steps_argument(int argc, char** argv, const char* name) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 20;
  if (steps < 1 || argc > 2) {
    std::fprintf(stderr, "usage: %s [steps >= 1]\n", name);
    std::exit(2);
  }
  return steps;
}

// Milliseconds per call of enqueue() on `stream`: one warm-up, then `calls` timed by events.
template <class Enqueue>
double time_ms(cudaStream_t stream, int calls, Enqueue&& enqueue) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start), cudaEventCreate(&stop);
  enqueue();
  check(cudaStreamSynchronize(stream), "warm-up");
  cudaEventRecord(start, stream);
  for (int s = 0; s < calls; ++s) enqueue();
  cudaEventRecord(stop, stream);
  check(cudaEventSynchronize(stop), "timed calls");
  float ms = 0.0f;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start), cudaEventDestroy(stop);
  return double(ms) / calls;
}

// Milliseconds per replay of the graph that record() enqueues on `stream` (captured once).
template <class Record>
double graph_time_ms(cudaStream_t stream, int calls, Record&& record) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "capture");
  record();
  check(cudaStreamEndCapture(stream, &graph), "capture");
  check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  const double ms = time_ms(stream, calls, [&] { cudaGraphLaunch(exec, stream); });
  cudaGraphExecDestroy(exec), cudaGraphDestroy(graph);
  return ms;
}

// Device-to-device copy of 1 GiB, counted as bytes read + written.
inline double copy_rate_gbps(cudaStream_t stream, int calls) {
  void *a = nullptr, *b = nullptr;
  const size_t bytes = size_t(1) << 30;
  check(cudaMalloc(&a, bytes), "copy buffer"), check(cudaMalloc(&b, bytes), "copy buffer");
  const double ms = time_ms(
      stream, calls, [&] { cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream); });
  cudaFree(a), cudaFree(b);
  return 2.0 * double(bytes) / ms / 1e6;
}

}  // namespace probe
