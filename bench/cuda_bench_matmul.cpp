// CUDA quantized matmul throughput (backend/cuda/quant_matmul.h), per weight type:
//   decode: GB/s of weight bytes for one token (the matrix-vector path), on 4096 x 4096 and
//           14336 x 4096 weights (rows x columns), as a share of the device-to-device copy rate;
//   prefill: TFLOP/s (2 * rows * columns * tokens per second) at 512 tokens.
// Copy bandwidth convention: cudaMemcpyAsync device to device of a 512 MiB buffer, counted as
// bytes read + bytes written (2 x size) per second, which is what a kernel streaming weights
// can hope to read. Weights cycle through enough copies (>= 512 MiB in all) that L2 (50 MB on
// H200) holds none of them between calls. Times: CUDA events around back-to-back launches,
// median of 5 repetitions. Weights are random bytes: speed does not depend on their values.
// Decode is timed twice: calls enqueued one by one ("stream": includes the host's launch cost,
// which bounds small matrices when a call launches two kernels, as the int8 path does), and the
// same calls captured once into a CUDA graph and replayed ("graph": device time, what an engine
// that records its decode step as a graph sees).
//
// A second table times decode's product alone (matmul_quantized, the activations quantized once
// beforehand, as q/k/v or gate/up can share them): the fixed cost of the quantize kernel is gone.
//
// Usage: cuda_bench_matmul [TYPE ...]   (default: every type the CUDA kernels support)
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/quant_matmul.h"
#include "quant/qtype.h"

namespace {

using sluice::QType;
namespace cuda = sluice::cuda;

constexpr size_t kMiB = size_t(1) << 20;
constexpr int kRepetitions = 5;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Milliseconds per call of `launch(i)` (which enqueues on `stream`), median over repetitions of
// `calls` back-to-back calls.
template <class Launch>
double time_per_call_ms(const cuda::Stream& stream, int calls, Launch launch) {
  cuda::Event start, stop;
  for (int i = 0; i < 3; ++i) launch(i);  // warm-up (table upload, clocks)
  stream.synchronize();
  std::vector<double> times;
  for (int rep = 0; rep < kRepetitions; ++rep) {
    start.record(stream);
    for (int i = 0; i < calls; ++i) launch(i);
    stop.record(stream);
    stop.synchronize();
    times.push_back(double(stop.elapsed_ms_since(start)) / calls);
  }
  return median(times);
}

// As time_per_call_ms, but the `calls` launches are captured into one CUDA graph and replayed.
template <class Launch>
double graph_time_per_call_ms(const cuda::Stream& stream, int calls, Launch launch) {
  for (int i = 0; i < 3; ++i) launch(i);  // warm-up (tables, scratch), outside the capture
  stream.synchronize();
  const auto s = static_cast<cudaStream_t>(stream.handle());
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return -1.0;
  for (int i = 0; i < calls; ++i) launch(i);
  if (cudaStreamEndCapture(s, &graph) != cudaSuccess ||
      cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
    return -1.0;
  }
  cudaGraphLaunch(exec, s);  // warm-up replay
  stream.synchronize();
  cuda::Event start, stop;
  std::vector<double> times;
  for (int rep = 0; rep < kRepetitions; ++rep) {
    start.record(stream);
    cudaGraphLaunch(exec, s);
    stop.record(stream);
    stop.synchronize();
    times.push_back(double(stop.elapsed_ms_since(start)) / calls);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return median(times);
}

double copy_bandwidth_gbs(const cuda::Stream& stream) {
  const size_t bytes = 512 * kMiB;
  cuda::DeviceBuffer a(bytes), b(bytes);
  cuda::fill_bytes(a.data(), 1, bytes, stream);
  const double ms = time_per_call_ms(
      stream, 20, [&](int) { cuda::copy_on_device(b.data(), a.data(), bytes, stream); });
  return 2.0 * double(bytes) / (ms * 1e-3) / 1e9;
}

// Fills device memory with pseudo-random bytes (xorshift on the host, then copied).
void fill_random(void* device, size_t bytes, uint64_t seed, const cuda::Stream& stream) {
  std::vector<uint64_t> host((bytes + 7) / 8);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (uint64_t& v : host) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    v = s;
  }
  cuda::copy_to_device(device, host.data(), bytes, stream);
  stream.synchronize();
}

struct Result {
  double decode_gbs = 0.0;
  double decode_graph_gbs = 0.0;
  double prefill_tflops = 0.0;
  double product_gbs = 0.0;  // matmul_quantized (0 for the float types)
  double product_graph_gbs = 0.0;
};

Result bench_shape(QType type, int64_t n_rows, int64_t n_cols, const cuda::Stream& stream) {
  const size_t weight_bytes = size_t(n_rows) * *sluice::row_bytes(type, uint64_t(n_cols));
  const size_t copies = std::max<size_t>(1, (512 * kMiB + weight_bytes - 1) / weight_bytes);
  std::vector<cuda::DeviceBuffer> weights;
  for (size_t i = 0; i < copies; ++i) {
    weights.emplace_back(weight_bytes);
    if (i == 0) {
      fill_random(weights[0].data(), weight_bytes, uint64_t(type) + 1, stream);
    } else {
      cuda::copy_on_device(weights[i].data(), weights[0].data(), weight_bytes, stream);
    }
  }
  constexpr int64_t kPrefillTokens = 512;
  cuda::DeviceBuffer x(size_t(kPrefillTokens * n_cols) * sizeof(float));
  cuda::DeviceBuffer y(size_t(kPrefillTokens * n_rows) * sizeof(float));
  cuda::fill_bytes(x.data(), 0, x.size(), stream);
  std::string error;
  auto run = [&](int i, int64_t tokens) {
    if (!cuda::matmul(type, weights[size_t(i) % copies].data(), n_rows, n_cols, x.as<float>(),
                      y.as<float>(), tokens, stream.handle(), &error)) {
      std::fprintf(stderr, "cuda_bench_matmul: %s\n", error.c_str());
      std::exit(1);
    }
  };
  Result result;
  const double decode_ms = time_per_call_ms(stream, 200, [&](int i) { run(i, 1); });
  result.decode_gbs = double(weight_bytes) / (decode_ms * 1e-3) / 1e9;
  const double graph_ms = graph_time_per_call_ms(stream, 200, [&](int i) { run(i, 1); });
  result.decode_graph_gbs = graph_ms > 0 ? double(weight_bytes) / (graph_ms * 1e-3) / 1e9 : 0.0;
  const double prefill_ms = time_per_call_ms(stream, 10, [&](int i) { run(i, kPrefillTokens); });
  result.prefill_tflops =
      2.0 * double(n_rows) * double(n_cols) * double(kPrefillTokens) / (prefill_ms * 1e-3) / 1e12;
  if (cuda::quantized_decode_supported(type)) {
    cuda::DeviceBuffer xq(size_t(cuda::quantized_activation_bytes(type, n_cols, 1)));
    if (!cuda::quantize_activations(type, x.as<float>(), n_cols, 1, xq.data(), stream.handle(),
                                    &error)) {
      std::fprintf(stderr, "cuda_bench_matmul: %s\n", error.c_str());
      std::exit(1);
    }
    auto product = [&](int i) {
      if (!cuda::matmul_quantized(type, weights[size_t(i) % copies].data(), n_rows, n_cols,
                                  xq.data(), y.as<float>(), 1, stream.handle(), &error)) {
        std::fprintf(stderr, "cuda_bench_matmul: %s\n", error.c_str());
        std::exit(1);
      }
    };
    const double product_ms = time_per_call_ms(stream, 200, product);
    result.product_gbs = double(weight_bytes) / (product_ms * 1e-3) / 1e9;
    const double product_graph_ms = graph_time_per_call_ms(stream, 200, product);
    result.product_graph_gbs =
        product_graph_ms > 0 ? double(weight_bytes) / (product_graph_ms * 1e-3) / 1e9 : 0.0;
  }
  return result;
}

}  // namespace

int main(int argc, char** argv) try {
  if (sluice::cuda::device_count() == 0) {
    std::printf("cuda_bench_matmul: no CUDA device present, nothing measured\n");
    return 0;
  }
  std::vector<QType> types;
  for (int i = 1; i < argc; ++i) {
    const auto type = sluice::qtype_from_name(argv[i]);
    if (!type || !sluice::cuda::quant_matmul_supported(*type)) {
      std::fprintf(stderr, "cuda_bench_matmul: unknown or unsupported type %s\n", argv[i]);
      return 2;
    }
    types.push_back(*type);
  }
  if (types.empty()) {
    for (const auto* t = sluice::all_qtypes_begin(); t != sluice::all_qtypes_end(); ++t) {
      if (sluice::cuda::quant_matmul_supported(t->type)) types.push_back(t->type);
    }
  }
  cuda::Stream stream;
  const double copy_gbs = copy_bandwidth_gbs(stream);
  std::printf("device: %s\n", sluice::cuda::describe_device(0).c_str());
  std::printf("device-to-device copy: %.0f GB/s (bytes read + written)\n\n", copy_gbs);
  std::printf(
      "decode: GB/s of weights at 1 token (%% of the copy rate); stream = calls enqueued one\n"
      "by one, graph = the same calls replayed from a CUDA graph (device time)\n\n");
  std::printf("%-8s %6s | %29s | %29s | %22s\n", "type", "bits", "decode 4096x4096",
              "decode 14336x4096", "prefill 512 tok TFLOP/s");
  std::printf("%-8s %6s | %14s %14s | %14s %14s | %10s %11s\n", "", "", "stream", "graph", "stream",
              "graph", "4096x4096", "14336x4096");
  std::vector<std::pair<Result, Result>> results;
  for (const QType type : types) {
    const auto& traits = sluice::traits_of(type);
    const double bits = 8.0 * traits.block_bytes / traits.block_size;
    const Result small = bench_shape(type, 4096, 4096, stream);
    const Result large = bench_shape(type, 14336, 4096, stream);
    results.emplace_back(small, large);
    std::printf(
        "%-8s %6.3f | %6.0f (%4.1f%%) %6.0f (%4.1f%%) | %6.0f (%4.1f%%) %6.0f (%4.1f%%) | %10.1f "
        "%11.1f\n",
        std::string(traits.name).c_str(), bits, small.decode_gbs,
        100.0 * small.decode_gbs / copy_gbs, small.decode_graph_gbs,
        100.0 * small.decode_graph_gbs / copy_gbs, large.decode_gbs,
        100.0 * large.decode_gbs / copy_gbs, large.decode_graph_gbs,
        100.0 * large.decode_graph_gbs / copy_gbs, small.prefill_tflops, large.prefill_tflops);
    std::fflush(stdout);
  }
  std::printf(
      "\ndecode product alone (matmul_quantized: activations quantized once beforehand), GB/s\n"
      "of weights at 1 token (%% of the copy rate)\n\n");
  std::printf("%-8s | %29s | %29s\n", "type", "4096x4096", "14336x4096");
  std::printf("%-8s | %14s %14s | %14s %14s\n", "", "stream", "graph", "stream", "graph");
  for (size_t i = 0; i < types.size(); ++i) {
    const auto& [small, large] = results[i];
    if (small.product_gbs == 0.0) continue;
    std::printf("%-8s | %6.0f (%4.1f%%) %6.0f (%4.1f%%) | %6.0f (%4.1f%%) %6.0f (%4.1f%%)\n",
                std::string(sluice::traits_of(types[i]).name).c_str(), small.product_gbs,
                100.0 * small.product_gbs / copy_gbs, small.product_graph_gbs,
                100.0 * small.product_graph_gbs / copy_gbs, large.product_gbs,
                100.0 * large.product_gbs / copy_gbs, large.product_graph_gbs,
                100.0 * large.product_graph_gbs / copy_gbs);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "cuda_bench_matmul: %s\n", e.what());
  return 1;
}
