// Metrics: the counters /metrics reports in Prometheus text format — requests by API and
// status, tokens in and out, generation speed, queue depth, active requests, cached sessions
// and the expert cache's hits, misses and bytes read. Updated from any HTTP thread.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "sluice/engine.h"

namespace sluice::server {

struct SchedulerCounts;

class Metrics {
 public:
  void count_request(const char* api, int status);
  // Prometheus exposition text; `counts` and `experts` are sampled by the caller.
  std::string render(const SchedulerCounts* counts, const ExpertTelemetry* experts) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;  // (api, status) → count
};

}  // namespace sluice::server
