// ExpertCounters' sum.
#include "experts/expert_stats.h"

namespace sluice::experts {

void ExpertCounters::add(const ExpertCounters& o) {
  hits += o.hits;
  misses += o.misses;
  experts_read += o.experts_read;
  bytes_read += o.bytes_read;
  evictions += o.evictions;
  speculative_reads += o.speculative_reads;
  speculative_used += o.speculative_used;
  speculative_wasted += o.speculative_wasted;
  io_wait_ns += o.io_wait_ns;
  read_ns += o.read_ns;
}

}  // namespace sluice::experts
