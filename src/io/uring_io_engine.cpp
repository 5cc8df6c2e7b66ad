// UringIoEngine: the IoEngine over one io_uring ring (liburing), driven from the owner's thread
// alone — no threads of its own. Holds a slot per read in flight, a software queue for reads
// beyond the queue depth, and resumes short reads. Passes fd, offset, length and dest through
// unchanged: O_DIRECT's 4 KiB alignment is the caller's (a misaligned read completes with EINVAL).
// Knows nothing of what the bytes are.
#include <liburing.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <vector>

#include "core/error.h"
#include "io/io_engine_impls.h"

namespace sluice {
namespace {

// One SQE asks for at most this much: its length field is 32 bits and the kernel stops one read
// near 2 GiB anyway; a power of two keeps every piece of an aligned read aligned for O_DIRECT.
constexpr uint64_t kMaxPiece = uint64_t{1} << 30;

struct Slot {
  ReadRequest request;
  uint64_t done = 0;  // bytes already in request.dest; the next piece starts here
};

class UringIoEngine final : public IoEngine {
 public:
  explicit UringIoEngine(int queue_depth) : slots_(static_cast<size_t>(queue_depth)) {
    free_slots_.reserve(slots_.size());
    for (size_t i = slots_.size(); i > 0; --i) free_slots_.push_back(static_cast<uint32_t>(i - 1));
  }

  // The ring is made outside the constructor so that its failure is a value: kAuto falls back.
  int init() {
    int ret = io_uring_queue_init(static_cast<unsigned>(slots_.size()), &ring_, 0);
    initialized_ = ret == 0;
    return ret;
  }

  ~UringIoEngine() override;

  const char* name() const override { return "io_uring"; }
  int queue_depth() const override { return static_cast<int>(slots_.size()); }

  void submit(const ReadRequest& request) override {
    queue_.push(request);
    fill_slots();
    flush();
  }

  bool cancel(uint64_t tag) override { return queue_.cancel(tag); }
  void promote(uint64_t tag) override { queue_.promote(tag); }
  size_t reap(std::span<ReadCompletion> out, size_t min_count) override;

  size_t pending() const override { return queue_.size() + in_flight() + ready_.size(); }

 private:
  size_t in_flight() const { return slots_.size() - free_slots_.size(); }
  void fill_slots();
  void prepare_piece(uint32_t index);
  void flush();
  void collect();
  void on_cqe(uint32_t index, int res);
  void finish(uint32_t index, int error);

  io_uring ring_{};
  bool initialized_ = false;
  std::vector<Slot> slots_;           // [queue_depth]; a CQE's user_data is its slot's index
  std::vector<uint32_t> free_slots_;  // indices of slots with no read
  ReadQueue queue_;                   // reads waiting for a slot
  std::deque<ReadCompletion> ready_;  // finished, not yet handed to the caller
};

// The caller's buffers must not be written once the engine is gone, and a ring torn down with
// reads in the kernel gives no such promise: wait for every read in flight first. Queued reads
// never started and are dropped; short reads are not resumed.
UringIoEngine::~UringIoEngine() {
  if (!initialized_) return;
  queue_.clear();
  io_uring_submit(&ring_);  // anything prepared but not yet handed over (a failed flush)
  size_t outstanding = in_flight();
  while (outstanding > 0) {
    io_uring_cqe* cqe = nullptr;
    int ret = io_uring_wait_cqe(&ring_, &cqe);
    if (ret == -EINTR || ret == -EAGAIN) continue;
    if (ret < 0) break;  // the ring itself is broken: nothing left to wait on
    io_uring_cqe_seen(&ring_, cqe);
    --outstanding;
  }
  io_uring_queue_exit(&ring_);
}

// Starts queued reads while slots are free. Called after every change that frees a slot or
// queues a read, so a non-empty queue always means every slot is busy.
void UringIoEngine::fill_slots() {
  while (!free_slots_.empty() && !queue_.empty()) {
    ReadRequest request = queue_.pop();
    if (request.length == 0) {  // nothing to read: done without touching the fd
      ready_.push_back({request.tag, 0});
      continue;
    }
    uint32_t index = free_slots_.back();
    free_slots_.pop_back();
    slots_[index] = {request, 0};
    prepare_piece(index);
  }
}

// Queues an SQE for what slot `index` still lacks; flush() hands it to the kernel.
void UringIoEngine::prepare_piece(uint32_t index) {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) {  // the ring has at least queue_depth entries, so only unflushed ones
    flush();
    sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) fail("io_uring: no submission entry free for slot ", index);
  }
  const Slot& slot = slots_[index];
  const ReadRequest& request = slot.request;
  if (slot.done == 0 && request.n_segments > 0 && request.length <= kMaxPiece) {
    io_uring_prep_readv(sqe, request.fd, request.segments, request.n_segments, request.offset);
  } else {  // a plain read, or the rest of a short scattered one, segment by segment
    const ReadPiece at = read_piece(request, slot.done);
    uint64_t piece = std::min(at.contiguous, kMaxPiece);
    io_uring_prep_read(sqe, request.fd, at.dest, static_cast<unsigned>(piece),
                       request.offset + slot.done);
  }
  io_uring_sqe_set_data64(sqe, index);
}

void UringIoEngine::flush() {
  while (io_uring_sq_ready(&ring_) > 0) {
    int ret = io_uring_submit(&ring_);
    if (ret == -EINTR || ret == -EAGAIN) continue;
    // A bad read is reported in its CQE, not here: an error here means the ring cannot work.
    if (ret < 0) fail("io_uring: submit failed: ", std::strerror(-ret));
    if (ret == 0) fail("io_uring: the kernel took none of ", io_uring_sq_ready(&ring_), " reads");
  }
}

// Handles every CQE already posted, without waiting; slots freed on the way start queued reads.
void UringIoEngine::collect() {
  unsigned head = 0;
  unsigned seen = 0;
  io_uring_cqe* cqe = nullptr;
  io_uring_for_each_cqe(&ring_, head, cqe) {
    on_cqe(static_cast<uint32_t>(io_uring_cqe_get_data64(cqe)), cqe->res);
    ++seen;
  }
  io_uring_cq_advance(&ring_, seen);
  flush();
}

void UringIoEngine::on_cqe(uint32_t index, int res) {
  Slot& slot = slots_[index];
  if (res == -EINTR || res == -EAGAIN) return prepare_piece(index);  // transient: ask again
  if (res < 0) return finish(index, -res);
  if (res == 0 && slot.done < slot.request.length) return finish(index, ENODATA);
  slot.done += static_cast<uint64_t>(res);
  if (slot.done < slot.request.length) return prepare_piece(index);  // short read: the rest
  finish(index, 0);
}

void UringIoEngine::finish(uint32_t index, int error) {
  ready_.push_back({slots_[index].request.tag, error});
  free_slots_.push_back(index);
  fill_slots();
}

size_t UringIoEngine::reap(std::span<ReadCompletion> out, size_t min_count) {
  size_t need = std::min(min_count, pending());
  collect();
  while (ready_.size() < need) {
    // need <= pending() and a queued read implies a full ring, so a read is in the kernel.
    io_uring_cqe* cqe = nullptr;
    int ret = io_uring_wait_cqe(&ring_, &cqe);
    if (ret < 0 && ret != -EINTR && ret != -EAGAIN) {
      fail("io_uring: waiting for completions failed: ", std::strerror(-ret));
    }
    collect();
  }
  size_t count = std::min(out.size(), ready_.size());
  std::copy_n(ready_.begin(), count, out.begin());
  ready_.erase(ready_.begin(), ready_.begin() + static_cast<std::ptrdiff_t>(count));
  return count;
}

}  // namespace

std::unique_ptr<IoEngine> make_uring_io_engine(int queue_depth, int* error) {
  auto engine = std::make_unique<UringIoEngine>(queue_depth);
  int ret = engine->init();
  if (ret < 0) {
    *error = -ret;
    return nullptr;
  }
  return engine;
}

}  // namespace sluice
