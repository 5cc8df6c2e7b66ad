// How fast can the weight products of a dense 8B decode step stream, depending on how they are
// launched and on what runs between them? A probe for issue 8's decode roofline
// (docs/BENCHMARKS.md, session 19): the backend's own per-row Q4_K decode body
// (int8_matvec_row) over the 32 layers of a Llama-3.1-8B geometry (q+k+v 6144 x 4096, o 4096 x
// 4096, gate+up 28672 x 4096, down 4096 x 14336: 3.93 GB of random weights), one token, the same
// quantized activations feeding every product. Printed, per step of 128 products:
//   launches      one kernel per product, each launched as a dependent of the one before
//                 (programmatic stream serialization, as the backend's decode chain), in a graph;
//   +prefetch     the same, each warp asking L2 for its row before griddepcontrol.wait;
//   small kernel  a one-block kernel after every product (norm-shaped, or a 3 / 10 µs spin), with
//                 and without that prefetch: what a dependent small kernel costs on the critical
//                 path, and whether the next product's weights arrive while it runs; before
//                 those, globaltimer stamps: when the first block of a product starts and passes
//                 its wait, against the 10 µs spin ahead of it;
//   persistent    one cooperative kernel of one wave of blocks, every warp walking rows of each
//                 product in turn, a grid-wide barrier after each product (a megakernel's
//                 skeleton); no-barrier: the same without the barriers.
// Built with the CUDA backend (bench/CMakeLists.txt); run on the GPU machine:
//   build/bench/cuda_layer_probe [steps]
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cuda/quant_int8_matvec.cuh"

namespace layer_probe {

using namespace sluice::cuda;
using namespace sluice::cuda::quant;
constexpr sluice::QType kType = sluice::QType::Q4_K;
constexpr int kLayers = 32, kProducts = 4;
constexpr int64_t kRows[kProducts] = {6144, 4096, 28672, 4096};
constexpr int64_t kCols[kProducts] = {4096, 4096, 4096, 14336};

int64_t row_bytes(int64_t cols) {
  return cols / 256 * 144;
}

void check(cudaError_t status, const char* what) {
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

struct Product {
  const uint8_t* w;
  float* y;
  uint64_t* stamps;  // not nullptr: block 0 records [entry, after the wait]
  int64_t n_rows, n_cols, row_bytes;
  QuantizedRows q;
};

// kPrefetch: lane 0 asks L2 for the warp's row (one bulk prefetch) before waiting for the
// kernel ahead, so those bytes can arrive while it runs.
template <bool kPrefetch>
__global__ void __launch_bounds__(128) product_kernel(Product p) {
  const int64_t row = int64_t(blockIdx.x) * 4 + threadIdx.x / 32;
  if (row >= p.n_rows) return;
  if (p.stamps != nullptr && blockIdx.x == 0 && threadIdx.x == 0) p.stamps[0] = now_ns();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (kPrefetch && threadIdx.x % 32 == 0) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p.w + row * p.row_bytes),
                 "r"(uint32_t(p.row_bytes))
                 : "memory");
  }
#endif
  wait_for_prerequisite();
  if (p.stamps != nullptr && blockIdx.x == 0 && threadIdx.x == 0) p.stamps[1] = now_ns();
  int8_matvec_row<kType, 1>(p.w + row * p.row_bytes, p.q, p.n_cols, p.y + row, 1);
  allow_dependent_launch();
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

__global__ void __launch_bounds__(128)
    persistent_kernel(const Product* products, int n, bool barriers) {
  const int64_t n_warps = int64_t(gridDim.x) * 4;
  const int64_t warp = int64_t(blockIdx.x) * 4 + threadIdx.x / 32;
  for (int i = 0; i < n; ++i) {
    const Product p = products[i];
    for (int64_t row = warp; row < p.n_rows; row += n_warps) {
      int8_matvec_row<kType, 1>(p.w + row * p.row_bytes, p.q, p.n_cols, p.y + row, 1);
    }
    if (barriers) cooperative_groups::this_grid().sync();
  }
}

}  // namespace layer_probe

int main(int argc, char** argv) {
  using namespace layer_probe;
  const int steps = argc > 1 ? std::atoi(argv[1]) : 20;
  if (steps < 1 || argc > 2) {
    std::fprintf(stderr, "usage: cuda_layer_probe [steps >= 1]\n");
    return 2;
  }
  // Weights of every layer, quantized activations for both widths, outputs.
  std::vector<Product> products;
  int64_t weight_bytes = 0;
  void* act[2];
  for (int a = 0; a < 2; ++a) {
    const int64_t cols = a == 0 ? 4096 : 14336;
    const int64_t bytes = quantized_rows_bytes(1, cols, 256);
    check(cudaMalloc(&act[a], bytes), "activations");
    fill_random<<<256, 256>>>(static_cast<uint32_t*>(act[a]), bytes / 4, 7u + a);
  }
  for (int l = 0; l < kLayers; ++l) {
    for (int i = 0; i < kProducts; ++i) {
      Product p{};
      p.n_rows = kRows[i], p.n_cols = kCols[i], p.row_bytes = row_bytes(kCols[i]);
      void* w = nullptr;
      void* y = nullptr;
      check(cudaMalloc(&w, p.n_rows * p.row_bytes), "weights");
      check(cudaMalloc(&y, p.n_rows * sizeof(float)), "outputs");
      fill_random<<<1024, 256>>>(static_cast<uint32_t*>(w), p.n_rows * p.row_bytes / 4,
                                 uint32_t(l * 8 + i));
      p.w = static_cast<const uint8_t*>(w), p.y = static_cast<float*>(y);
      p.q = split_scratch(act[kCols[i] == 4096 ? 0 : 1], 1, p.n_cols, 256);
      weight_bytes += p.n_rows * p.row_bytes;
      products.push_back(p);
    }
  }
  Product* d_products = nullptr;
  check(cudaMalloc(&d_products, products.size() * sizeof(Product)), "product list");
  check(cudaMemcpy(d_products, products.data(), products.size() * sizeof(Product),
                   cudaMemcpyHostToDevice),
        "product list");
  check(cudaDeviceSynchronize(), "setup");

  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  cudaEvent_t start, stop;
  cudaEventCreate(&start), cudaEventCreate(&stop);
  const auto time_ms = [&](auto&& enqueue) {
    enqueue();  // warm-up
    check(cudaStreamSynchronize(stream), "warm-up");
    cudaEventRecord(start, stream);
    for (int s = 0; s < steps; ++s) enqueue();
    cudaEventRecord(stop, stream);
    check(cudaEventSynchronize(stop), "timed steps");
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    return double(ms) / steps;
  };

  // Device-to-device copy of 1 GiB, counted as bytes read + written (as bench/cuda_vs_llamacpp.py).
  void *a = nullptr, *b = nullptr;
  const size_t copy_bytes = size_t(1) << 30;
  check(cudaMalloc(&a, copy_bytes), "copy buffer"),
      check(cudaMalloc(&b, copy_bytes), "copy buffer");
  const double copy_ms =
      time_ms([&] { cudaMemcpyAsync(b, a, copy_bytes, cudaMemcpyDeviceToDevice, stream); });
  const double copy_gbps = 2.0 * double(copy_bytes) / copy_ms / 1e6;
  cudaFree(a), cudaFree(b);

  // launches: one dependent launch per product, captured as a graph; optionally a small kernel
  // after each product (spin_ns > 0: a spin of that long; 0: the norm-shaped body; < 0: none).
  float* small_out = nullptr;
  check(cudaMalloc(&small_out, 4096 * sizeof(float)), "small kernel output");
  uint64_t* stamps = nullptr;
  check(cudaMalloc(&stamps, products.size() * 4 * sizeof(uint64_t)), "stamps");
  const auto graph_ms = [&](bool prefetch, int64_t spin_ns, bool stamped = false) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "capture");
    for (size_t i = 0; i < products.size(); ++i) {
      Product p = products[i];
      if (stamped) p.stamps = stamps + 4 * i;
      const dim3 grid(unsigned((p.n_rows + 3) / 4));
      check(prefetch ? launch_dependent(product_kernel<true>, grid, dim3(128), 0, stream, true, p)
                     : launch_dependent(product_kernel<false>, grid, dim3(128), 0, stream, true, p),
            "product launch");
      if (spin_ns >= 0) {
        check(launch_dependent(small_kernel, dim3(1), dim3(256), 0, stream, true,
                               static_cast<const float*>(p.y), small_out, spin_ns,
                               stamped ? stamps + 4 * i + 2 : nullptr),
              "small launch");
      }
    }
    check(cudaStreamEndCapture(stream, &graph), "capture");
    check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
    const double ms = time_ms([&] { cudaGraphLaunch(exec, stream); });
    cudaGraphExecDestroy(exec), cudaGraphDestroy(graph);
    return ms;
  };
  const double launches_ms = graph_ms(false, -1);

  int per_sm = 0, sms = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, persistent_kernel, 128, 0);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int n = int(products.size());
  const auto persistent = [&](bool barriers) {
    void* args[] = {&d_products, const_cast<int*>(&n), &barriers};
    check(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(persistent_kernel),
                                      dim3(unsigned(sms * per_sm)), dim3(128), args, 0, stream),
          "cooperative launch");
  };
  const double persistent_ms = time_ms([&] { persistent(true); });
  const double free_ms = time_ms([&] { persistent(false); });

  std::printf("weights %.1f MB per step, copy %.0f GB/s, %d steps each, persistent grid %d x %d\n",
              weight_bytes / 1e6, copy_gbps, steps, sms, per_sm);
  const auto row = [&](const char* name, double ms) {
    const double gbps = weight_bytes / ms / 1e6;
    std::printf("%-11s %7.3f ms/step %7.0f GB/s %5.1f%% of copy\n", name, ms, gbps,
                100.0 * gbps / copy_gbps);
  };
  row("launches", launches_ms);
  row("+prefetch", graph_ms(true, -1));
  // When does a product's first block start, relative to the 10 us spin ahead of it?
  graph_ms(false, 10000, true);
  std::vector<uint64_t> h(products.size() * 4);
  check(cudaMemcpy(h.data(), stamps, h.size() * 8, cudaMemcpyDeviceToHost), "stamps");
  for (size_t i = 1; i < 9; ++i) {
    const uint64_t* cur = &h[4 * i];
    const uint64_t* prev = &h[4 * (i - 1)];
    std::printf(
        "product %zu: entry %+.2f us, past its wait %+.2f us, relative to the spin's "
        "start (spin ends %+.2f)\n",
        i, (double(cur[0]) - double(prev[2])) / 1e3, (double(cur[1]) - double(prev[2])) / 1e3,
        (double(prev[3]) - double(prev[2])) / 1e3);
  }
  for (const int64_t spin : {int64_t(0), int64_t(3000), int64_t(10000)}) {
    const double plain = graph_ms(false, spin), early = graph_ms(true, spin);
    std::printf(
        "small kernel %s after each product: %.3f ms/step, with L2 prefetch before the "
        "wait %.3f (%.1f us a product saved)\n",
        spin == 0 ? "(norm-shaped)" : (std::to_string(spin / 1000) + " us spin").c_str(), plain,
        early, (plain - early) * 1000.0 / double(products.size()));
  }
  row("persistent", persistent_ms);
  row("no-barrier", free_ms);
  return 0;
}
