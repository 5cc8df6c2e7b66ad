// The CPU's one-token matvec rate by the size of the weight matrix (Q4_K, 4096 columns): how far
// a matrix that fits the last-level cache overstates the rate at which a hybrid placement's
// experts — gigabytes, from DRAM — are read. runtime/calibration measures at twice the LLC for
// that reason (the H200 machine's host has 300 MiB of L3). Arguments: MiB of weights, threads.
//
//   build/bench/cpu_matvec_working_set --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/thread_pool.h"

namespace sluice {
namespace {

void BM_MatvecQ4K(benchmark::State& state) {
  const uint64_t row = row_bytes(QType::Q4_K, 4096).value_or(0);
  const int64_t rows = int64_t((uint64_t(state.range(0)) << 20) / row);
  // Any bytes time the same; a fixed pattern keeps the half-float scales finite.
  std::vector<uint8_t> weights(size_t(row * uint64_t(rows)), 0x11);
  std::vector<float> x(4096, 0.5f), y(static_cast<size_t>(rows));
  ThreadPool pool(int(state.range(1)));
  cpu::CpuBackend cpu(&pool);
  const MatrixView w{QType::Q4_K, weights.data(), 4096, rows};
  cpu.matmul(w, x.data(), y.data(), 1);  // pages faulted in
  for (auto _ : state) {
    cpu.matmul(w, x.data(), y.data(), 1);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(weights.size()));
}

BENCHMARK(BM_MatvecQ4K)
    ->ArgsProduct({{64, 600, 1024}, {1, 8, 16}})
    ->ArgNames({"MiB", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sluice

BENCHMARK_MAIN();
