// Software prefetch of the weight rows a few rows ahead of the one being multiplied, for the
// routed experts' products (cpu_expert_ops.cpp). A decode token's experts are scattered over a
// mapped file many times the caches' size, each chosen expert a fresh ~1 MiB run of rows; asking
// for the row `expert_rows_ahead()` on while this one is computed overlaps the memory's latency
// (and the page walks) with the work. Measured on the H200's 16-core Xeon host, hybrid decode
// of Qwen3-30B-A3B with 8 rows: 43.8 → 51.1 t/s on one lent machine, 39.7 / 43.3 → 41.8 / 44.7
// on a slower one (docs/BENCHMARKS.md); the dense matvec gained nothing (its rows are one long
// run the hardware prefetcher follows) and has none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>

namespace sluice::cpu {

// Rows ahead: 8, or SLUICE_CPU_PREFETCH_ROWS (0: none), for measuring.
inline int64_t expert_rows_ahead() {
  static const int64_t rows = [] {
    const char* value = std::getenv("SLUICE_CPU_PREFETCH_ROWS");
    return value ? std::strtoll(value, nullptr, 10) : int64_t(8);
  }();
  return rows;
}

// A hint to load [p, p + bytes) into the caches; never faults.
inline void prefetch_bytes(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (size_t offset = 0; offset < bytes; offset += 64) __builtin_prefetch(c + offset, 0, 3);
}

}  // namespace sluice::cpu
