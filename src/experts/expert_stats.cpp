// ExpertCounters' sum and the closing of a step.
#include "experts/expert_stats.h"

namespace sluice::experts {

void ExpertCounters::add(const ExpertCounters& o) {
  hits += o.hits;
  misses += o.misses;
  experts_read += o.experts_read;
  bytes_read += o.bytes_read;
  reads += o.reads;
  evictions += o.evictions;
  speculative_reads += o.speculative_reads;
  speculative_used += o.speculative_used;
  speculative_wasted += o.speculative_wasted;
  io_wait_ns += o.io_wait_ns;
  read_ns += o.read_ns;
}

ExpertStats::ExpertStats(size_t n_layer) : per_layer(n_layer) {
  history.reserve(kMaxHistory);
}

void ExpertStats::close_step() {
  total.add(last_step);
  if (history.size() < kMaxHistory) history.push_back(last_step);
  last_step = {};
  ++steps;
}

}  // namespace sluice::experts
