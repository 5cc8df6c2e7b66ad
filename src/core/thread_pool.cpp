// The pool's start/finish handshake. A loop publishes its task, then bumps `generation_`
// (release); workers waiting on it (C++20 atomic wait, a futex on Linux) wake, take chunks
// from `next_chunk_`, and count themselves out of `workers_busy_`. The caller takes chunks too
// and returns only when every worker has counted out, so the task outlives all readers.
#include "core/thread_pool.h"

namespace sluice {

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
    generation_.wait(seen, std::memory_order_acquire);
    seen = generation_.load(std::memory_order_acquire);
    if (stopping_.load(std::memory_order_relaxed)) return;
    work_on_current();
    if (workers_busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) workers_busy_.notify_one();
  }
}

}  // namespace sluice
