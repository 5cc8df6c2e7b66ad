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

#include "cuda_probe_weights.cuh"

namespace layer_probe {

using namespace probe;

struct Product : Matrix {
  uint64_t* stamps;  // not nullptr: block 0 records [entry, after the wait]
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
  const int steps = steps_argument(argc, argv, "cuda_layer_probe");
  int64_t weight_bytes = 0;
  std::vector<Product> products;
  for (const Matrix& m : make_step(&weight_bytes)) products.push_back(Product{m, nullptr});
  Product* d_products = nullptr;
  check(cudaMalloc(&d_products, products.size() * sizeof(Product)), "product list");
  check(cudaMemcpy(d_products, products.data(), products.size() * sizeof(Product),
                   cudaMemcpyHostToDevice),
        "product list");
  check(cudaDeviceSynchronize(), "setup");

  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  const auto time_ms = [&](auto&& enqueue) { return probe::time_ms(stream, steps, enqueue); };
  const double copy_gbps = copy_rate_gbps(stream, steps);

  // launches: one dependent launch per product, captured as a graph; optionally a small kernel
  // after each product (spin_ns > 0: a spin of that long; 0: the norm-shaped body; < 0: none).
  float* small_out = nullptr;
  check(cudaMalloc(&small_out, 4096 * sizeof(float)), "small kernel output");
  uint64_t* stamps = nullptr;
  check(cudaMalloc(&stamps, products.size() * 4 * sizeof(uint64_t)), "stamps");
  const auto graph_ms = [&](bool prefetch, int64_t spin_ns, bool stamped = false) {
    return graph_time_ms(stream, steps, [&] {
      for (size_t i = 0; i < products.size(); ++i) {
        Product p = products[i];
        if (stamped) p.stamps = stamps + 4 * i;
        const dim3 grid(unsigned((p.n_rows + 3) / 4));
        check(prefetch
                  ? launch_dependent(product_kernel<true>, grid, dim3(128), 0, stream, true, p)
                  : launch_dependent(product_kernel<false>, grid, dim3(128), 0, stream, true, p),
              "product launch");
        if (spin_ns >= 0) {
          check(launch_dependent(small_kernel, dim3(1), dim3(256), 0, stream, true,
                                 static_cast<const float*>(p.y), small_out, spin_ns,
                                 stamped ? stamps + 4 * i + 2 : nullptr),
                "small launch");
        }
      }
    });
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
