// IoEngine: many positional reads in flight at once, for the expert cache's misses. Two
// implementations behind one interface: io_uring (liburing) at a configurable queue depth, and a
// pool of threads doing pread, for kernels or sandboxes where io_uring is unavailable. Reads
// complete whole or fail with an errno; short reads are resumed inside the engine. Knows nothing
// of experts, tensors or file formats: it moves bytes from a file descriptor into a buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

struct iovec;

namespace sluice {

enum class IoEngineKind : uint8_t {
  kAuto,   // io_uring when the kernel allows it, else the pread pool
  kUring,  // io_uring only: creating fails with a sluice::Error when unavailable
  kPread,  // the pread thread pool
};

enum class IoPriority : uint8_t {
  kDemand,       // a computation waits on it: started before any queued speculative read
  kSpeculative,  // a guess (prefetch): may be cancelled while still queued
};

struct ReadRequest {
  int fd = -1;
  uint64_t offset = 0;  // with an O_DIRECT fd: offset, length and dest aligned to 4 KiB
  uint64_t length = 0;
  void* dest = nullptr;  // length bytes, owned by the caller until the completion is reaped
  uint64_t tag = 0;      // returned in the completion; the engine never interprets it
  IoPriority priority = IoPriority::kDemand;
  // A scattered read: when n_segments > 0 the bytes land in these buffers one after another
  // (their lengths sum to length; with O_DIRECT each is 4 KiB-aligned in address and length) and
  // dest is unused. The array is the caller's until the completion is reaped. One request, so
  // one device command for what would otherwise be several reads of adjacent ranges.
  const iovec* segments = nullptr;
  uint32_t n_segments = 0;
};

struct ReadCompletion {
  uint64_t tag = 0;
  int error = 0;  // 0: all `length` bytes are in dest; else an errno (ENODATA: file ended first)
};

class IoEngine {
 public:
  virtual ~IoEngine() = default;

  virtual const char* name() const = 0;  // "io_uring" or "pread"
  virtual int queue_depth() const = 0;   // reads the device sees at once, at most

  // Queues a read. It starts at once while fewer than queue_depth() reads are in flight, else
  // waits in the engine's queue: demand reads ahead of speculative ones, FIFO within each.
  // Never blocks on I/O. A read stays in flight until reap() collects its completion, and
  // queued reads start only inside submit() and reap() (min_count 0 polls): both engines thus
  // start reads at the same points, in the same order. fd, offset, length and dest pass through
  // unchanged; with an O_DIRECT fd their alignment is the caller's (misaligned: EINVAL).
  virtual void submit(const ReadRequest& request) = 0;

  // Removes a read that has not started yet; true when it was removed (it then never
  // completes). A read already in flight is not interrupted: false, and it completes normally.
  virtual bool cancel(uint64_t tag) = 0;

  // Raises the priority of a queued speculative read to demand (a guess became a need). No-op
  // when the read is already in flight or unknown.
  virtual void promote(uint64_t tag) = 0;

  // Blocks until at least min(min_count, pending()) reads have completed, then moves up to
  // out.size() completions into `out` and returns how many. min_count 0 polls.
  virtual size_t reap(std::span<ReadCompletion> out, size_t min_count) = 0;

  // Submitted (queued or in flight) and not yet reaped.
  virtual size_t pending() const = 0;
};

// queue_depth >= 1. kAuto falls back to the pread pool (with queue_depth threads) when
// io_uring_queue_init fails (ENOSYS, EPERM under seccomp, io_uring_disabled).
std::unique_ptr<IoEngine> make_io_engine(IoEngineKind kind, int queue_depth);

// "auto", "io_uring", "pread" → kind; a sluice::Error naming the value otherwise.
IoEngineKind parse_io_engine_kind(const char* text);

}  // namespace sluice
