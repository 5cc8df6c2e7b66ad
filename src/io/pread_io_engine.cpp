// PreadIoEngine: the IoEngine as queue_depth threads each doing one blocking pread at a time, for
// kernels or sandboxes without io_uring. Resumes short reads and retries EINTR; fd, offset,
// length and dest pass through unchanged (O_DIRECT's 4 KiB alignment is the caller's). Knows
// nothing of what the bytes are.
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "core/error.h"
#include "io/io_engine_impls.h"

namespace sluice {
namespace {

// One pread asks for at most this much (Linux stops one read near 2 GiB); a power of two keeps
// every piece of an aligned read aligned for O_DIRECT.
constexpr uint64_t kMaxPiece = uint64_t{1} << 30;

// 0 when all of request.length arrived, else the errno (ENODATA: the file ended first).
int read_fully(const ReadRequest& request) {
  uint64_t done = 0;
  while (done < request.length) {
    ssize_t n = 0;
    if (done == 0 && request.n_segments > 0 && request.length <= kMaxPiece) {
      n = ::preadv(request.fd, request.segments, static_cast<int>(request.n_segments),
                   static_cast<off_t>(request.offset));
    } else {  // a plain read, or the rest of a short scattered one, segment by segment
      const ReadPiece at = read_piece(request, done);
      size_t piece = static_cast<size_t>(std::min(at.contiguous, kMaxPiece));
      n = ::pread(request.fd, at.dest, piece, static_cast<off_t>(request.offset + done));
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return ENODATA;
    done += static_cast<uint64_t>(n);
  }
  return 0;
}

// These threads block in the kernel for the length of a read, which is why they are the
// engine's own and not the compute pool's. A read counts as in flight from the moment the
// owner's thread assigns it (in submit or reap) until reap collects its completion — as in the
// io_uring engine, whose slots free only when reap sees the CQE. So which read starts next is
// decided on the owner's thread alone, in the same order for both engines, and cancel()
// answers the same whatever the workers are doing.
class PreadIoEngine final : public IoEngine {
 public:
  explicit PreadIoEngine(int queue_depth) : queue_depth_(static_cast<size_t>(queue_depth)) {
    try {
      workers_.reserve(queue_depth_);
      for (size_t i = 0; i < queue_depth_; ++i) workers_.emplace_back([this] { work(); });
    } catch (const std::system_error& e) {
      stop();
      fail("io: cannot start ", queue_depth_, " pread threads: ", e.what());
    }
  }

  ~PreadIoEngine() override { stop(); }

  const char* name() const override { return "pread"; }
  int queue_depth() const override { return static_cast<int>(queue_depth_); }

  void submit(const ReadRequest& request) override {
    std::lock_guard lock(mutex_);
    queue_.push(request);
    fill_slots();
  }

  bool cancel(uint64_t tag) override {
    std::lock_guard lock(mutex_);
    return queue_.cancel(tag);
  }

  void promote(uint64_t tag) override {
    std::lock_guard lock(mutex_);
    queue_.promote(tag);
  }

  size_t reap(std::span<ReadCompletion> out, size_t min_count) override;

  size_t pending() const override {
    std::lock_guard lock(mutex_);
    return queue_.size() + in_flight_ + ready_.size();
  }

 private:
  void fill_slots();
  void collect();
  void work();
  void stop();

  const size_t queue_depth_;
  mutable std::mutex mutex_;             // guards everything below but workers_
  std::condition_variable work_cv_;      // started_ gained a read, or stopping_
  std::condition_variable done_cv_;      // finished_ gained a completion
  ReadQueue queue_;                      // reads waiting for a slot
  std::deque<ReadRequest> started_;      // assigned a slot, not yet taken by a worker
  std::deque<ReadCompletion> finished_;  // done by a worker, slot not yet freed by reap
  std::deque<ReadCompletion> ready_;     // collected by reap, not yet handed to the caller
  size_t in_flight_ = 0;                 // started_ + being read + finished_
  bool stopping_ = false;
  std::vector<std::thread> workers_;  // [queue_depth]
};

// Assigns queued reads to free slots; mutex_ held.
void PreadIoEngine::fill_slots() {
  while (in_flight_ < queue_depth_ && !queue_.empty()) {
    started_.push_back(queue_.pop());
    ++in_flight_;
    work_cv_.notify_one();
  }
}

// Frees the slots of finished reads and refills them; mutex_ held.
void PreadIoEngine::collect() {
  while (!finished_.empty()) {
    ready_.push_back(finished_.front());
    finished_.pop_front();
    --in_flight_;
  }
  fill_slots();
}

size_t PreadIoEngine::reap(std::span<ReadCompletion> out, size_t min_count) {
  std::unique_lock lock(mutex_);
  size_t need = std::min(min_count, queue_.size() + in_flight_ + ready_.size());
  collect();
  while (ready_.size() < need) {
    done_cv_.wait(lock, [this] { return !finished_.empty(); });
    collect();
  }
  size_t count = std::min(out.size(), ready_.size());
  std::copy_n(ready_.begin(), count, out.begin());
  ready_.erase(ready_.begin(), ready_.begin() + static_cast<std::ptrdiff_t>(count));
  return count;
}

void PreadIoEngine::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stopping_ || !started_.empty(); });
    if (stopping_) return;
    ReadRequest request = started_.front();
    started_.pop_front();
    lock.unlock();
    int error = read_fully(request);
    lock.lock();
    finished_.push_back({request.tag, error});
    done_cv_.notify_one();  // only the owner's thread waits on it
  }
}

// Reads being performed finish (the caller's buffers stay theirs until the threads are joined);
// reads queued or not yet taken by a worker are dropped.
void PreadIoEngine::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    queue_.clear();
    started_.clear();
  }
  work_cv_.notify_all();
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
}

}  // namespace

std::unique_ptr<IoEngine> make_pread_io_engine(int queue_depth) {
  return std::make_unique<PreadIoEngine>(queue_depth);
}

}  // namespace sluice
