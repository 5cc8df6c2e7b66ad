// Private to io/: what the two IoEngine implementations share — the software queue that holds
// reads beyond the queue depth (demand ahead of speculative, FIFO within each) — and their
// constructors, which make_io_engine chooses between. Knows nothing of how a read is performed.
#pragma once

#include <sys/uio.h>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>

#include "io/io_engine.h"

namespace sluice {

// Where byte `done` of a request lands and how many bytes from there are contiguous in memory:
// dest + done for a plain read; inside the segment holding `done` for a scattered one (a short
// read is resumed segment by segment).
struct ReadPiece {
  char* dest = nullptr;
  uint64_t contiguous = 0;
};
inline ReadPiece read_piece(const ReadRequest& request, uint64_t done) {
  if (request.n_segments == 0)
    return {static_cast<char*>(request.dest) + done, request.length - done};
  for (uint32_t i = 0; i < request.n_segments; ++i) {
    const iovec& segment = request.segments[i];
    if (done < segment.iov_len)
      return {static_cast<char*>(segment.iov_base) + done, segment.iov_len - done};
    done -= segment.iov_len;
  }
  return {};
}

// Reads waiting for a free slot. Tags are expected to be unique among pending reads; when they
// repeat, cancel() and promote() act on the oldest queued read with the tag.
class ReadQueue {
 public:
  bool empty() const { return demand_.empty() && speculative_.empty(); }
  size_t size() const { return demand_.size() + speculative_.size(); }

  void push(const ReadRequest& request) {
    (request.priority == IoPriority::kDemand ? demand_ : speculative_).push_back(request);
  }

  // The next read to start: the oldest demand read, else the oldest speculative one. !empty().
  ReadRequest pop() {
    std::deque<ReadRequest>& from = demand_.empty() ? speculative_ : demand_;
    ReadRequest request = from.front();
    from.pop_front();
    return request;
  }

  bool cancel(uint64_t tag) { return erase(demand_, tag) || erase(speculative_, tag); }

  // A promoted read joins the back of the demand queue: it became a need only now, so demand
  // reads queued before it keep their turn.
  void promote(uint64_t tag) {
    auto it = find(speculative_, tag);
    if (it == speculative_.end()) return;
    ReadRequest request = *it;
    speculative_.erase(it);
    request.priority = IoPriority::kDemand;
    demand_.push_back(request);
  }

  void clear() {
    demand_.clear();
    speculative_.clear();
  }

 private:
  static std::deque<ReadRequest>::iterator find(std::deque<ReadRequest>& queue, uint64_t tag) {
    return std::find_if(queue.begin(), queue.end(),
                        [tag](const ReadRequest& request) { return request.tag == tag; });
  }
  static bool erase(std::deque<ReadRequest>& queue, uint64_t tag) {
    auto it = find(queue, tag);
    if (it == queue.end()) return false;
    queue.erase(it);
    return true;
  }

  std::deque<ReadRequest> demand_;       // started before any speculative read
  std::deque<ReadRequest> speculative_;  // prefetch guesses, cancellable while here
};

// Null, with *error set to the (positive) errno, when io_uring_queue_init fails: the caller
// decides whether that is fatal (kUring) or a reason to fall back (kAuto).
std::unique_ptr<IoEngine> make_uring_io_engine(int queue_depth, int* error);

std::unique_ptr<IoEngine> make_pread_io_engine(int queue_depth);

}  // namespace sluice
