// JobChannel: one mutex and one condition variable between the engine thread and the HTTP
// thread of a request.
#include "server/job.h"

namespace sluice::server {

void JobChannel::push(std::vector<TokenEvent>& events) {
  if (events.empty()) return;
  {
    std::lock_guard lock(mutex_);
    for (TokenEvent& event : events) events_.push_back(std::move(event));
  }
  ready_.notify_all();
}

void JobChannel::finish(const GenerationResult& result) {
  {
    std::lock_guard lock(mutex_);
    result_ = result;
    ended_ = true;
  }
  ready_.notify_all();
}

void JobChannel::fail(int status, std::string message) {
  {
    std::lock_guard lock(mutex_);
    failed_ = true;
    error_status_ = status;
    error_ = std::move(message);
    ended_ = true;
  }
  ready_.notify_all();
}

bool JobChannel::wait(std::vector<TokenEvent>& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  ready_.wait_for(lock, timeout, [&] { return ended_ || !events_.empty(); });
  for (TokenEvent& event : events_) out.push_back(std::move(event));
  events_.clear();
  return ended_;
}

}  // namespace sluice::server
