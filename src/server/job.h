// A generation request on its way through the scheduler, and the channel its tokens come back
// on. The HTTP thread that submitted it waits on the channel (streaming what arrives); the
// engine thread pushes events and the end. Either side may set `cancel`; the engine notices it
// within one step and frees the request's slot.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "sluice/engine.h"

namespace sluice::server {

class JobChannel {
 public:
  // Engine side.
  void push(std::vector<TokenEvent>& events);
  void finish(const GenerationResult& result);
  void fail(int status, std::string message);

  // HTTP side: waits up to `timeout` for events or the end, moves the events into `out`.
  // Returns true once the job has ended and every event has been taken.
  bool wait(std::vector<TokenEvent>& out, std::chrono::milliseconds timeout);
  bool failed() const { return failed_; }
  int error_status() const { return error_status_; }
  const std::string& error() const { return error_; }
  const GenerationResult& result() const { return result_; }  // valid once wait() said ended

  std::atomic<bool> cancel{false};

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<TokenEvent> events_;
  bool ended_ = false;
  bool failed_ = false;
  int error_status_ = 500;
  std::string error_;
  GenerationResult result_;
};

struct Job {
  GenerationRequest request;
  std::string session;  // a client's conversation key: its KV cache is kept for it first
  std::shared_ptr<JobChannel> channel = std::make_shared<JobChannel>();
};

}  // namespace sluice::server
