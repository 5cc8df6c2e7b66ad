// The pool's start/finish handshake. A loop publishes its task, then bumps `generation_`
// (release); workers waiting on it wake, take chunks from `next_chunk_`, and count themselves
// out of `workers_busy_`. The caller takes chunks too and returns only when every worker has
// counted out, so the task outlives all readers. Both waits spin briefly before sleeping on the
// futex (C++20 atomic wait): a forward pass runs hundreds of short loops per token, and a futex
// wake-up per loop (tens of microseconds each) would cost more than the loops themselves.
#include "core/thread_pool.h"

#include <sched.h>

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace sluice {
namespace {

// How long a waiter polls before it sleeps: long enough to cover the gap between two loops of
// one forward pass, short enough that an idle pool stops burning a core almost at once.
constexpr auto kSpinTime = std::chrono::microseconds(200);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Polls until `value` differs from `old` or the spin time is up; returns the last value read.
// After a short busy spin it yields between polls, so on an oversubscribed machine the thread
// it waits for gets the core instead of losing it to the poller.
template <class T>
T spin_while_equal(const std::atomic<T>& value, T old) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (int i = 0;; ++i) {
    const T now = value.load(std::memory_order_acquire);
    if (now != old) return now;
    if (i < 256) {
      cpu_relax();
    } else {
      sched_yield();
      if (std::chrono::steady_clock::now() > deadline) return now;
    }
  }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  const int n_workers = n_threads > 1 ? n_threads - 1 : 0;
  workers_.reserve(size_t(n_workers));
  for (int i = 0; i < n_workers; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::run(const Task& task) {
  task_ = task;
  next_chunk_.store(task.begin, std::memory_order_relaxed);
  workers_busy_.store(int(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  work_on_current();
  for (int busy = workers_busy_.load(std::memory_order_acquire); busy != 0;
       busy = workers_busy_.load(std::memory_order_acquire)) {
    if (spin_while_equal(workers_busy_, busy) != busy) continue;
    workers_busy_.wait(busy, std::memory_order_acquire);
  }
}

void ThreadPool::work_on_current() {
  const Task& task = task_;
  for (;;) {
    const int64_t lo = next_chunk_.fetch_add(task.chunk, std::memory_order_relaxed);
    if (lo >= task.end) return;
    const int64_t hi = lo + task.chunk < task.end ? lo + task.chunk : task.end;
    task.call(task.body, lo, hi);
  }
}

void ThreadPool::worker_loop() {
  // Generation 0 is the constructor's: a loop started before this thread first runs must
  // still be seen as new, so do not read the current value here.
  uint32_t seen = 0;
  for (;;) {
    if (spin_while_equal(generation_, seen) == seen) {
      generation_.wait(seen, std::memory_order_acquire);
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stopping_.load(std::memory_order_relaxed)) return;
    work_on_current();
    if (workers_busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) workers_busy_.notify_one();
  }
}

}  // namespace sluice
