// Scheduler: admission, the choice of session per job, and the engine thread's round of steps.
// Only the engine thread touches sessions and generations; the mutex covers the queue, the
// stop flags and the counters the HTTP threads read.
#include "server/scheduler.h"

#include <algorithm>
#include <chrono>

namespace sluice::server {

Scheduler::Scheduler(std::shared_ptr<Model> model, SessionOptions session_options,
                     SchedulerLimits limits)
    : model_(std::move(model)), session_options_(session_options), limits_(limits) {
  limits_.parallel = std::max(1, limits_.parallel);
  limits_.cached_sessions = std::max(limits_.parallel, limits_.cached_sessions);
  // One session now: a context the machine cannot hold fails at start, not at the first request.
  Slot& first = slots_.emplace_back();
  first.session = std::make_unique<Session>(model_, session_options_);
  n_ctx_ = first.session->n_ctx();
  // One token through the model before the server says ready: the weights are paged in and
  // the scratch sized now, not inside the first client's time to first token.
  const int32_t warm_up[1] = {model_->tokenizer().bos_id().value_or(0)};
  first.session->eval(warm_up);
  first.session->clear();
  counts_.sessions = 1;
  thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() {
  shutdown(0);
}

Scheduler::Admission Scheduler::submit(Job job) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return Admission::kStopping;
    // Waiting room: the queue proper plus the slots free now (a job waits there only until the
    // engine thread, possibly busy with a step, admits it).
    const int64_t free_slots = std::max<int64_t>(0, limits_.parallel - counts_.active);
    if (int64_t(queue_.size()) >= limits_.max_queue + free_slots) return Admission::kQueueFull;
    queue_.push_back(std::move(job));
    counts_.queued = int64_t(queue_.size());
  }
  wake_.notify_one();
  return Admission::kQueued;
}

void Scheduler::shutdown(double grace_seconds) {
  std::unique_lock lock(mutex_);
  if (!thread_.joinable()) return;
  stopping_ = true;
  for (Job& job : queue_) job.channel->fail(503, "the server is shutting down");
  queue_.clear();
  wake_.notify_one();
  drained_.wait_for(lock, std::chrono::duration<double>(std::max(0.0, grace_seconds)),
                    [&] { return counts_.active == 0; });
  cancel_active_ = true;
  lock.unlock();
  thread_.join();
}

SchedulerCounts Scheduler::counts() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

void Scheduler::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    admit(lock);
    counts_.active = int64_t(active_.size());
    counts_.queued = int64_t(queue_.size());
    if (active_.empty()) {
      drained_.notify_all();
      if (stopping_) return;
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      continue;
    }
    const bool cancel_all = cancel_active_;
    lock.unlock();
    if (cancel_all) {
      for (auto& active : active_) active->generation->stop();
    }
    step_all();
    lock.lock();
    for (auto& active : active_) {
      if (active->generation->finished()) retire(*active);
    }
    std::erase_if(active_, [](const auto& a) { return a->generation->finished(); });
  }
}

// Called with the lock held; the sessions themselves are the engine thread's alone.
void Scheduler::admit(std::unique_lock<std::mutex>& lock) {
  (void)lock;
  while (int64_t(active_.size()) < limits_.parallel && !queue_.empty()) {
    Job job = std::move(queue_.front());
    queue_.pop_front();
    if (job.channel->cancel.load()) {
      job.channel->fail(499, "the client went away before the request started");
      continue;
    }
    try {
      Slot* slot = choose_slot(job);
      // The channel (and its cancel flag) is shared, so the pointer survives moving the job.
      auto generation =
          std::make_unique<Generation>(*slot->session, job.request, &job.channel->cancel);
      slot->busy = true;
      slot->last_used = ++clock_;
      if (!job.session.empty()) slot->key = job.session;
      active_.push_back(
          std::make_unique<Active>(Active{std::move(job), slot, std::move(generation)}));
    } catch (const std::exception& e) {
      job.channel->fail(400, e.what());
    }
  }
}

// A conversation's cache is worth more than the evaluation of a shared system prompt: a job
// continues the slot whose whole content its prompt extends; otherwise it takes a fresh slot
// (or, when all exist, the least recently used one no client pinned) and copies into it the
// longest prefix another slot shares with its prompt, leaving that slot's conversation intact.
Scheduler::Slot* Scheduler::choose_slot(const Job& job) {
  const std::vector<int32_t>& prompt = job.request.prompt;
  Slot* continuation = nullptr;  // the prompt extends everything it holds
  Slot* partial = nullptr;       // shares the longest prefix with the prompt
  int64_t continuation_prefix = 0, partial_prefix = 0;
  Slot* oldest = nullptr;  // least recently used, preferring slots no client pinned
  for (Slot& slot : slots_) {
    if (slot.busy) continue;
    if (!job.session.empty() && slot.key == job.session) return &slot;
    auto rank = [](const Slot& s) { return std::pair(!s.key.empty(), s.last_used); };
    if (oldest == nullptr || rank(slot) < rank(*oldest)) oldest = &slot;
    const int64_t prefix = slot.session->reusable_prefix(prompt);
    if (prefix == 0) continue;
    const int64_t held = int64_t(slot.session->tokens().size());
    if (slot.key.empty() && prefix + 1 >= held && prefix > continuation_prefix) {
      continuation = &slot, continuation_prefix = prefix;
    } else if (prefix > partial_prefix) {
      partial = &slot, partial_prefix = prefix;
    }
  }
  if (continuation != nullptr) return continuation;
  Slot* target = oldest;
  if (int64_t(slots_.size()) < limits_.cached_sessions) {
    target = &slots_.emplace_back();
    target->session = std::make_unique<Session>(model_, session_options_);
    counts_.sessions = int64_t(slots_.size());
  }
  target->key.clear();  // whatever conversation it held is about to be overwritten
  if (partial != nullptr && partial != target) {
    target->session->copy_prefix_from(*partial->session, partial_prefix);
  }
  return target;
}

void Scheduler::step_all() {
  const size_t n = active_.size();
  round_generations_.clear();
  round_event_lists_.clear();
  if (round_events_.size() < n) round_events_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    round_generations_.push_back(active_[i]->generation.get());
    round_events_[i].clear();
    round_event_lists_.push_back(&round_events_[i]);
  }
  try {
    Generation::step_all(round_generations_, round_event_lists_);
  } catch (const std::exception& e) {
    // A forward that failed fails the requests of this round; their sessions' committed tokens
    // stay consistent (a forward commits at its end) and the engine goes on.
    for (size_t i = 0; i < n; ++i) {
      Active& active = *active_[i];
      active.job.channel->push(round_events_[i]);
      if (active.generation->finished()) {  // ended before the forward that failed
        active.job.channel->finish(active.generation->result());
        continue;
      }
      active.generation->stop();
      std::vector<TokenEvent> ignored;
      active.generation->step(ignored);
      active.job.channel->fail(500, e.what());
    }
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    Active& active = *active_[i];
    active.job.channel->push(round_events_[i]);
    if (active.generation->finished()) active.job.channel->finish(active.generation->result());
  }
}

// Called with the lock held.
void Scheduler::retire(Active& active) {
  active.slot->busy = false;
  const GenerationStats& stats = active.generation->result().stats;
  counts_.prompt_tokens += uint64_t(stats.n_prompt);
  counts_.prompt_tokens_reused += uint64_t(stats.n_prompt_reused);
  counts_.generated_tokens += uint64_t(stats.n_generated);
  counts_.prompt_seconds += stats.prompt_seconds;
  counts_.generate_seconds += stats.generate_seconds;
}

}  // namespace sluice::server
