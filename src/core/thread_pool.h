// ThreadPool: a fixed set of worker threads that run one parallel loop at a time, with the
// calling thread taking part. Work is handed out in chunks from an atomic counter, so a
// call allocates nothing and the result of each index never depends on which thread ran it.
// Knows nothing of tensors or kernels. Not re-entrant: one parallel_for at a time per pool,
// and the loop body must not throw (errors never cross threads; see DESIGN.md rule 5).
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace sluice {

class ThreadPool {
 public:
  // `n_threads` counts the caller: a pool of 1 has no workers and runs loops inline.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }

  // Calls body(begin_chunk, end_chunk) over [begin, end) in chunks of `chunk` indices (the
  // last may be shorter), spread over all threads; returns when every chunk is done.
  template <class Body>
  void parallel_for(int64_t begin, int64_t end, int64_t chunk, Body&& body) {
    if (end <= begin) return;
    if (chunk < 1) chunk = 1;
    if (workers_.empty() || end - begin <= chunk) {
      for (int64_t lo = begin; lo < end; lo += chunk) body(lo, end - lo < chunk ? end : lo + chunk);
      return;
    }
    Task task{&call_body<std::remove_reference_t<Body>>, &body, begin, end, chunk};
    run(task);
  }

 private:
  struct Task {
    void (*call)(void* body, int64_t lo, int64_t hi);
    void* body;
    int64_t begin, end, chunk;
  };

  template <class Body>
  static void call_body(void* body, int64_t lo, int64_t hi) {
    (*static_cast<Body*>(body))(lo, hi);
  }

  void run(const Task& task);
  void work_on_current();  // takes chunks until none are left
  void worker_loop();

  std::vector<std::thread> workers_;
  Task task_{};
  std::atomic<int64_t> next_chunk_{0};   // the next index to hand out
  std::atomic<uint32_t> generation_{0};  // bumped once per loop; workers wait on it
  std::atomic<int> workers_busy_{0};     // workers still inside the current loop
  std::atomic<bool> stopping_{false};
};

}  // namespace sluice
