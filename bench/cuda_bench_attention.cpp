// Decode attention on the GPU (CudaBackend::attention, split-K flash-decoding) over 4k and 32k
// cached positions: time per call from CUDA events and the KV bytes read per second, beside a
// device-to-device copy of the same bytes as the bandwidth reference. Prefill attention (causal
// prompt of 512 / 2048 tokens from position 0, Llama-like and gpt-oss-like heads; F16 cells with
// 64/128/256 dims run the tensor-core kernel): TFLOP/s, counting 2 FLOPs per multiply-add of
// Q·K^T and P·V over the visible cells only. Registers nothing when
// the CUDA backend is not built or no device is present. A benchmark, not a test.
#include <benchmark/benchmark.h>

#ifdef SLUICE_HAVE_CUDA

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_memory.h"

namespace {

using sluice::cuda::CudaBackend;
using sluice::cuda::DeviceBuffer;
using sluice::cuda::Event;

struct Geometry {
  int64_t n_head, n_head_kv, head_dim;
};
constexpr Geometry kLlama8B{32, 8, 128};  // Llama 3 8B / Qwen3 8B-class GQA 4
constexpr Geometry kGptOss{64, 8, 64};    // gpt-oss: GQA 8, 64 dims, sinks

CudaBackend& backend() {
  static CudaBackend instance;
  return instance;
}

void fill_random_halves(DeviceBuffer& buffer, size_t n_halves) {
  std::vector<uint16_t> host(n_halves);
  uint32_t state = 12345;
  for (auto& h : host) {
    state = state * 1664525u + 1013904223u;
    h = uint16_t(0x3000 | (state >> 22));  // halves in [0.125, 0.25) with random mantissas
  }
  sluice::cuda::copy_to_device(buffer.data(), host.data(), n_halves * 2, backend().stream());
}

void BM_DecodeAttention(benchmark::State& state, Geometry g, bool sinks) {
  const int64_t n_cached = state.range(0);
  CudaBackend& gpu = backend();
  const size_t kv_halves = size_t(n_cached * g.n_head_kv * g.head_dim);
  DeviceBuffer k(kv_halves * 2), v(kv_halves * 2);
  fill_random_halves(k, kv_halves);
  fill_random_halves(v, kv_halves);
  DeviceBuffer q(size_t(g.n_head * g.head_dim) * 4), out(size_t(g.n_head * g.head_dim) * 4);
  DeviceBuffer sink_values(size_t(g.n_head) * 4);
  sluice::cuda::fill_bytes(q.data(), 0x3c, q.size(), gpu.stream());  // 0.0115 each
  sluice::cuda::fill_bytes(sink_values.data(), 0x3c, sink_values.size(), gpu.stream());
  sluice::AttentionCall call;
  call.q = q.as<float>();
  call.out = out.as<float>();
  call.n_tokens = 1;
  call.n_head = g.n_head;
  call.pos0 = n_cached - 1;
  call.scale = 0.088f;
  call.sinks = sinks ? sink_values.as<float>() : nullptr;
  call.kv = {
      sluice::KvElement::kF16, k.data(), v.data(), n_cached, g.n_head_kv, g.head_dim, g.head_dim};
  constexpr int kCalls = 50;
  Event start, stop;
  gpu.attention(call);  // warm-up (and scratch allocation)
  gpu.synchronize();
  for (auto _ : state) {
    start.record(gpu.stream());
    for (int i = 0; i < kCalls; ++i) gpu.attention(call);
    stop.record(gpu.stream());
    stop.synchronize();
    state.SetIterationTime(double(stop.elapsed_ms_since(start)) / 1e3 / kCalls);
  }
  const double bytes = double(2 * kv_halves * 2);
  state.counters["KV_GB/s"] =
      benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_PrefillAttention(benchmark::State& state, Geometry g) {
  const int64_t n_tokens = state.range(0);
  CudaBackend& gpu = backend();
  const size_t kv_halves = size_t(n_tokens * g.n_head_kv * g.head_dim);
  DeviceBuffer k(kv_halves * 2), v(kv_halves * 2);
  fill_random_halves(k, kv_halves);
  fill_random_halves(v, kv_halves);
  const size_t q_floats = size_t(n_tokens * g.n_head * g.head_dim);
  DeviceBuffer q(q_floats * 4), out(q_floats * 4);
  sluice::cuda::fill_bytes(q.data(), 0x3c, q.size(), gpu.stream());
  sluice::AttentionCall call;
  call.q = q.as<float>();
  call.out = out.as<float>();
  call.n_tokens = n_tokens;
  call.n_head = g.n_head;
  call.pos0 = 0;
  call.scale = 0.088f;
  call.kv = {
      sluice::KvElement::kF16, k.data(), v.data(), n_tokens, g.n_head_kv, g.head_dim, g.head_dim};
  constexpr int kCalls = 5;
  Event start, stop;
  gpu.attention(call);
  gpu.synchronize();
  for (auto _ : state) {
    start.record(gpu.stream());
    for (int i = 0; i < kCalls; ++i) gpu.attention(call);
    stop.record(gpu.stream());
    stop.synchronize();
    state.SetIterationTime(double(stop.elapsed_ms_since(start)) / 1e3 / kCalls);
  }
  const double visible = double(n_tokens) * double(n_tokens + 1) / 2;  // causal
  const double flops = 4.0 * double(g.n_head * g.head_dim) * visible;
  state.counters["TFLOP/s"] =
      benchmark::Counter(flops / 1e12, benchmark::Counter::kIsIterationInvariantRate);
}

// Reference: a device-to-device copy of one K plus one V cache of 32k positions (Llama 8B
// geometry), bytes read per second (a copy also writes as many).
void BM_DeviceCopy(benchmark::State& state) {
  CudaBackend& gpu = backend();
  const size_t bytes = size_t(2 * 32768 * kLlama8B.n_head_kv * kLlama8B.head_dim * 2);
  DeviceBuffer a(bytes), b(bytes);
  sluice::cuda::fill_bytes(a.data(), 1, bytes, gpu.stream());
  Event start, stop;
  for (auto _ : state) {
    start.record(gpu.stream());
    for (int i = 0; i < 20; ++i)
      sluice::cuda::copy_on_device(b.data(), a.data(), bytes, gpu.stream());
    stop.record(gpu.stream());
    stop.synchronize();
    state.SetIterationTime(double(stop.elapsed_ms_since(start)) / 1e3 / 20);
  }
  state.counters["read_GB/s"] =
      benchmark::Counter(double(bytes), benchmark::Counter::kIsIterationInvariantRate);
}

// Each iteration times 50 decode calls (5 prefill calls, 20 copies) and reports the time of one: a
// fixed iteration count, since the library's automatic count would aim at its minimum time per call
// and so run 50 times longer than intended.
constexpr int kIterations = 20;

bool register_all() {
  if (sluice::cuda::device_count() == 0) return false;
  benchmark::RegisterBenchmark("DecodeAttention/llama8b_f16", BM_DecodeAttention, kLlama8B, false)
      ->Arg(4096)
      ->Arg(32768)
      ->Iterations(kIterations)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("DecodeAttention/gpt_oss_f16_sinks", BM_DecodeAttention, kGptOss,
                               true)
      ->Arg(4096)
      ->Arg(32768)
      ->Iterations(kIterations)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("PrefillAttention/llama8b_f16", BM_PrefillAttention, kLlama8B)
      ->Arg(512)
      ->Arg(2048)
      ->Iterations(kIterations)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("PrefillAttention/gpt_oss_f16", BM_PrefillAttention, kGptOss)
      ->Arg(512)
      ->Arg(2048)
      ->Iterations(kIterations)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("DeviceCopy/kv32k", BM_DeviceCopy)
      ->Iterations(kIterations)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
  return true;
}

const bool registered = register_all();

}  // namespace

#endif  // SLUICE_HAVE_CUDA

BENCHMARK_MAIN();
