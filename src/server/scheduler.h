// The scheduler: the one engine thread of a loaded model. It admits jobs from a bounded queue
// into at most `parallel` active generations, each on a session (a KV cache) chosen for the
// longest shared prefix, and advances every active generation one step per round: those
// decoding together in one batched forward (one token each; every weight, and for MoE every
// needed expert, read once for all), those prefilling one chunk each, so long prefills yield
// and every stream keeps moving. Sessions stay
// cached after their request (LRU, at most `cached_sessions`) so a client that resends the
// whole history pays only for the new suffix; a job's `session` key keeps its cache for it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/job.h"
#include "sluice/engine.h"

namespace sluice::server {

struct SchedulerLimits {
  int parallel = 4;
  int cached_sessions = 8;
  int max_queue = 64;
};

struct SchedulerCounts {
  int64_t queued = 0;
  int64_t active = 0;
  int64_t sessions = 0;  // KV caches allocated
  uint64_t prompt_tokens = 0, prompt_tokens_reused = 0, generated_tokens = 0;
  double prompt_seconds = 0, generate_seconds = 0;
};

class Scheduler {
 public:
  Scheduler(std::shared_ptr<Model> model, SessionOptions session_options, SchedulerLimits limits);
  ~Scheduler();  // cancels everything and joins the engine thread

  enum class Admission { kQueued, kQueueFull, kStopping };
  // kQueueFull: the caller answers 429; kStopping: 503 (the server is shutting down).
  Admission submit(Job job);
  // Stops admitting; cancels the queue and, after `grace_seconds`, the active jobs; joins.
  void shutdown(double grace_seconds);
  SchedulerCounts counts() const;
  int64_t n_ctx() const { return n_ctx_; }

 private:
  struct Slot {
    std::unique_ptr<Session> session;
    std::string key;  // the session key of the conversation it holds ("" for none)
    uint64_t last_used = 0;
    bool busy = false;
  };
  struct Active {
    Job job;
    Slot* slot;
    std::unique_ptr<Generation> generation;
  };

  void run();
  void admit(std::unique_lock<std::mutex>& lock);
  Slot* choose_slot(const Job& job);
  void step_all();
  void retire(Active& active);

  std::shared_ptr<Model> model_;
  SessionOptions session_options_;
  SchedulerLimits limits_;
  int64_t n_ctx_ = 0;

  mutable std::mutex mutex_;      // guards queue_, stopping_, counts_ (the rest is engine-thread)
  std::condition_variable wake_;  // the engine thread: a job arrived, or stop
  std::condition_variable drained_;  // shutdown(): no job is active any more
  std::deque<Job> queue_;
  bool stopping_ = false;
  bool cancel_active_ = false;
  SchedulerCounts counts_;

  std::list<Slot> slots_;
  std::vector<std::unique_ptr<Active>> active_;
  // One round's scratch, reused: the generations and their event lists, in active_ order.
  std::vector<Generation*> round_generations_;
  std::vector<std::vector<TokenEvent>> round_events_;
  std::vector<std::vector<TokenEvent>*> round_event_lists_;
  uint64_t clock_ = 0;
  std::thread thread_;
};

}  // namespace sluice::server
