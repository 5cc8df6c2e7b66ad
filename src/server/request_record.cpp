// The access log line: key=value pairs, one line per request, on stderr.
#include "server/request_record.h"

#include <cstdio>

namespace sluice::server {

RequestRecord::RequestRecord(Metrics& metrics, Api api, std::string route, bool log)
    : metrics_(metrics), api_(api), route_(std::move(route)), log_(log) {}

RequestRecord::~RequestRecord() {
  metrics_.count_request(api_name(api_), status_);
  if (!log_) return;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fprintf(stderr,
               "sluice: access api=%s route=\"%s\" model=%s status=%d prompt_tokens=%lld "
               "completion_tokens=%lld seconds=%.3f outcome=%s\n",
               api_name(api_), route_.c_str(), model_.c_str(), status_,
               static_cast<long long>(prompt_tokens_), static_cast<long long>(generated_tokens_),
               seconds, outcome_.c_str());
}

}  // namespace sluice::server
