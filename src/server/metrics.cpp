// Metrics::render: one HELP/TYPE header per family, then its samples, as Prometheus parses them.
#include "server/metrics.h"

#include <sstream>

#include "server/scheduler.h"

namespace sluice::server {
namespace {

void family(std::ostringstream& out, const char* name, const char* type, const char* help) {
  out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

template <typename T>
void sample(std::ostringstream& out, const char* name, const char* type, const char* help,
            T value) {
  family(out, name, type, help);
  out << name << ' ' << value << '\n';
}

}  // namespace

void Metrics::count_request(const char* api, int status) {
  std::lock_guard lock(mutex_);
  ++requests_[{api, status}];
}

std::string Metrics::render(const SchedulerCounts* counts, const ExpertTelemetry* experts) const {
  std::ostringstream out;
  family(out, "sluice_requests_total", "counter", "HTTP requests answered, by API and status.");
  {
    std::lock_guard lock(mutex_);
    for (const auto& [key, n] : requests_) {
      out << "sluice_requests_total{api=\"" << key.first << "\",status=\"" << key.second << "\"} "
          << n << '\n';
    }
  }
  if (counts != nullptr) {
    sample(out, "sluice_prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
           counts->prompt_tokens);
    sample(out, "sluice_prompt_tokens_reused_total", "counter",
           "Prompt tokens taken from a cached session instead of evaluated.",
           counts->prompt_tokens_reused);
    sample(out, "sluice_generated_tokens_total", "counter", "Tokens generated.",
           counts->generated_tokens);
    sample(out, "sluice_prompt_seconds_total", "counter", "Time spent evaluating prompts.",
           counts->prompt_seconds);
    sample(out, "sluice_generate_seconds_total", "counter",
           "Time from each request's first token to its last.", counts->generate_seconds);
    const double rate = counts->generate_seconds > 0
                            ? double(counts->generated_tokens) / counts->generate_seconds
                            : 0.0;
    sample(out, "sluice_generate_tokens_per_second", "gauge",
           "Generated tokens per second of generation time, over all finished requests.", rate);
    sample(out, "sluice_queue_depth", "gauge", "Requests waiting for a generation slot.",
           counts->queued);
    sample(out, "sluice_active_requests", "gauge", "Requests generating now.", counts->active);
    sample(out, "sluice_cached_sessions", "gauge", "KV caches held for prefix reuse.",
           counts->sessions);
  }
  if (experts != nullptr && experts->streaming) {
    sample(out, "sluice_expert_cache_hits_total", "counter", "Routed experts found in the cache.",
           experts->hits);
    sample(out, "sluice_expert_cache_misses_total", "counter", "Routed experts read from disk.",
           experts->misses);
    sample(out, "sluice_expert_bytes_read_total", "counter", "Bytes of experts read from disk.",
           experts->bytes_read);
    sample(out, "sluice_expert_io_wait_seconds_total", "counter",
           "Time the forward waited on expert reads.", experts->io_wait_seconds);
  }
  return out.str();
}

}  // namespace sluice::server
