// Decode-time matvec throughput per weight type, in bytes of weights read per second, on
// 1 thread and on all hardware threads, beside a measured memory-bandwidth reference (a
// streaming read-and-sum over a large buffer). Weights are ~64 MiB per type so they come
// from DRAM, not cache. A benchmark, not a test: numbers depend on the machine and its load.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/fp8_dot.h"
#include "backend/cpu/matvec.h"
#include "backend/cpu/vec_dot.h"
#include "core/thread_pool.h"
#include "quant/dot_reference.h"
#include "quant/quantize.h"

namespace {

using sluice::QType;

constexpr int64_t kCols = 4096;
constexpr uint64_t kWeightBytes = 64ull << 20;      // per type: well past any L3
constexpr uint64_t kBandwidthBytes = kWeightBytes;  // the memory-read reference, same size

int all_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : int(n);
}

sluice::ThreadPool& pool_of(int n_threads) {
  static std::vector<std::unique_ptr<sluice::ThreadPool>> pools(256);
  auto& pool = pools[size_t(n_threads)];
  if (!pool) pool = std::make_unique<sluice::ThreadPool>(n_threads);
  return *pool;
}

// Random bytes with bit 6 cleared and bit 5 set in every byte: every half, float and E8M0
// scale built from them is then finite and normal (exponent bits neither all ones nor zero),
// so no NaN, infinity or denormal slows a kernel. The quant bits stay arbitrary otherwise.
std::vector<uint8_t> bench_bytes(uint64_t n, uint64_t seed) {
  std::vector<uint8_t> bytes(n);
  uint64_t state = seed;
  for (uint64_t i = 0; i + 8 <= n; i += 8) {
    state += 0x9e3779b97f4a7c15ull;  // splitmix64
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    z = (z & 0xbfbfbfbfbfbfbfbfull) | 0x2020202020202020ull;
    std::memcpy(bytes.data() + i, &z, 8);
  }
  return bytes;
}

struct MatvecCase {
  QType type;
  int64_t n_rows;
  std::vector<uint8_t> weights;     // [n_rows, row_bytes(type, kCols)]
  std::vector<uint8_t> activation;  // [row_bytes(activation type, kCols)]
};

// The last case built, kept so the 1-thread and all-thread runs of a type share it.
const MatvecCase& matvec_case(QType type) {
  static std::unique_ptr<MatvecCase> current;
  if (current && current->type == type) return *current;
  current.reset();
  auto made = std::make_unique<MatvecCase>();
  made->type = type;
  const uint64_t row_size = *sluice::row_bytes(type, kCols);
  made->n_rows = int64_t(kWeightBytes / row_size);
  made->weights = bench_bytes(uint64_t(made->n_rows) * row_size, uint64_t(type) + 1);
  const QType act = *sluice::activation_type_for(type);
  std::vector<float> x(kCols);  // [kCols]
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (float& v : x) v = value(rng);
  made->activation.resize(*sluice::row_bytes(act, kCols));
  sluice::quantize_row(act, x.data(), made->activation.data(), kCols);
  current = std::move(made);
  return *current;
}

void bm_matvec(benchmark::State& state, QType type, int n_threads) {
  const MatvecCase& c = matvec_case(type);
  std::vector<float> y(size_t(c.n_rows));  // [n_rows]
  sluice::ThreadPool& pool = pool_of(n_threads);
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the benchmark idiom
    sluice::cpu::matvec(type, c.weights.data(), c.activation.data(), y.data(), c.n_rows, kCols,
                        &pool);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(c.weights.size()));
  state.SetLabel(std::string(sluice::cpu::isa_name(sluice::cpu::vec_dot_kernel(type).isa)));
}

// FP8 block-scaled weights (E4M3 + a float32 scale per 128 x 128 block) against float32
// activations: not a QType, so it has its own case. bench_bytes never makes an E4M3 NaN code or
// subnormal (bit 6 clear, bit 5 set: exponent field 4..7). Bytes counted are the weights'.
void bm_matvec_fp8(benchmark::State& state, int n_threads) {
  static const int64_t n_rows = int64_t(kWeightBytes / uint64_t(kCols));
  static const std::vector<uint8_t> weights = bench_bytes(uint64_t(n_rows * kCols), 1000);
  static const std::vector<float> scale_inv = [] {
    const int64_t blocks =
        (n_rows / sluice::cpu::kFp8BlockSize) * (kCols / sluice::cpu::kFp8BlockSize);
    std::vector<float> out(size_t(blocks), 0.0f);  // [n_rows / 128, kCols / 128]
    std::mt19937 rng(43);
    std::uniform_real_distribution<float> value(1e-4f, 1e-2f);
    for (float& s : out) s = value(rng);
    return out;
  }();
  std::vector<float> x(kCols);  // [kCols]
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (float& v : x) v = value(rng);
  std::vector<float> y(static_cast<size_t>(n_rows));  // [n_rows]
  sluice::ThreadPool& pool = pool_of(n_threads);
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the benchmark idiom
    sluice::cpu::matvec_fp8_e4m3_block_scaled(weights.data(), scale_inv.data(), x.data(), y.data(),
                                              n_rows, kCols, &pool);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(weights.size()));
  const sluice::cpu::CpuIsa isa = sluice::cpu::best_isa();
  state.SetLabel(std::string(sluice::cpu::isa_name(sluice::cpu::fp8_e4m3_dot_kernel(isa).isa)));
}

// Streaming read of a buffer far larger than cache: what the weights of a matvec can at
// best flow at. It runs the widest F32 dot kernel of a chunk against itself (both operands
// are the same cache lines, so each byte comes from DRAM once), which keeps the read at
// full SIMD width: a plain baseline loop here runs ~20% below the kernels it should bound.
void bm_memory_read(benchmark::State& state, int n_threads) {
  static const std::vector<uint8_t> buffer = bench_bytes(kBandwidthBytes, 7);
  const auto* floats = reinterpret_cast<const float*>(buffer.data());  // [n_floats]
  const int64_t n_floats = int64_t(buffer.size() / sizeof(float));
  const sluice::VecDotFn dot = sluice::cpu::vec_dot_kernel(QType::F32).fn;
  sluice::ThreadPool& pool = pool_of(n_threads);
  std::vector<float> partial(256 * 16);  // one cache line per chunk slot
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): the benchmark idiom
    const int64_t chunk = n_floats / (4 * n_threads);
    pool.parallel_for(0, n_floats, chunk, [&](int64_t lo, int64_t hi) {
      partial[size_t((lo / chunk) % 256) * 16] += dot(floats + lo, floats + lo, hi - lo);
    });
    benchmark::DoNotOptimize(partial.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(buffer.size()));
  state.SetLabel(std::string(sluice::cpu::isa_name(sluice::cpu::vec_dot_kernel(QType::F32).isa)));
}

void register_all() {
  const int n_all = all_threads();
  std::vector<int> thread_counts = {1};
  if (n_all > 1) thread_counts.push_back(n_all);
  for (const int t : thread_counts) {
    benchmark::RegisterBenchmark(("memory_read/threads:" + std::to_string(t)).c_str(),
                                 bm_memory_read, t)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  for (const sluice::QTypeTraits* traits = sluice::all_qtypes_begin();
       traits != sluice::all_qtypes_end(); ++traits) {
    if (!sluice::activation_type_for(traits->type)) continue;
    for (const int t : thread_counts) {
      const std::string name =
          "matvec/" + std::string(traits->name) + "/threads:" + std::to_string(t);
      benchmark::RegisterBenchmark(name.c_str(), bm_matvec, traits->type, t)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  for (const int t : thread_counts) {
    benchmark::RegisterBenchmark(
        ("matvec/fp8_e4m3_block_scaled/threads:" + std::to_string(t)).c_str(), bm_matvec_fp8, t)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
