// RequestRecord: one request's line in the structured access log (API, route, model, status,
// tokens in and out, seconds) and its count in the metrics. Written when the last owner lets
// go: at the end of the handler, or of the stream that outlives it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "server/api_error.h"
#include "server/metrics.h"

namespace sluice::server {

class RequestRecord {
 public:
  RequestRecord(Metrics& metrics, Api api, std::string route, bool log);
  ~RequestRecord();
  RequestRecord(const RequestRecord&) = delete;
  RequestRecord& operator=(const RequestRecord&) = delete;

  void set_model(std::string model) { model_ = std::move(model); }
  void set_status(int status) { status_ = status; }
  void set_tokens(int64_t prompt, int64_t generated) {
    prompt_tokens_ = prompt;
    generated_tokens_ = generated;
  }
  void set_outcome(std::string outcome) { outcome_ = std::move(outcome); }

 private:
  Metrics& metrics_;
  Api api_;
  std::string route_;
  bool log_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::string model_ = "-";
  std::string outcome_ = "-";
  int status_ = 200;
  int64_t prompt_tokens_ = 0, generated_tokens_ = 0;
};

}  // namespace sluice::server
