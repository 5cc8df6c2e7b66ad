// ExpertStats: what the expert path did — hits, misses, bytes and experts read, evictions,
// speculative reads used and wasted, time spent waiting on I/O — in total and per MoE layer,
// plus the last step's figures. Plain counters; the source that owns them updates them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sluice::experts {

struct ExpertCounters {
  uint64_t hits = 0;          // acquired experts already in memory (or resident)
  uint64_t misses = 0;        // acquired experts that had to be read on demand
  uint64_t experts_read = 0;  // experts read from disk (demand + speculative)
  uint64_t bytes_read = 0;    // bytes read from disk
  uint64_t reads = 0;         // read requests issued (adjacent extents merged count once)
  uint64_t evictions = 0;     // slots reused for another expert
  uint64_t speculative_reads = 0;
  uint64_t speculative_used = 0;    // speculative reads later acquired
  uint64_t speculative_wasted = 0;  // evicted or cancelled before any use
  uint64_t io_wait_ns = 0;          // time the forward waited on reads
  uint64_t read_ns = 0;             // time with at least one read in flight (for GB/s)

  void add(const ExpertCounters& other);
};

struct ExpertStats {
  static constexpr size_t kMaxHistory = 16384;  // steps kept one by one (~1.3 MB)

  ExpertCounters total;
  ExpertCounters last_step;
  ExpertCounters prewarm;                 // reads made by a pre-warm before the first step
  std::vector<ExpertCounters> per_layer;  // [n_layer]; zeros for dense layers
  std::vector<ExpertCounters> history;    // [min(steps, kMaxHistory)] each step's counters
  uint64_t steps = 0;
  uint64_t slots = 0;       // cache capacity in experts (0: resident, no cache)
  uint64_t slot_bytes = 0;  // bytes per slot

  explicit ExpertStats(size_t n_layer);
  // Adds the step to the total and the history and starts the next one. The history's room is
  // reserved up front: the token loop never allocates.
  void close_step();
};

}  // namespace sluice::experts
