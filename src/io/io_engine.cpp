// make_io_engine and parse_io_engine_kind: choosing between the io_uring engine and the pread
// pool. Knows only how to pick one; how reads are performed lives in the two implementations.
#include "io/io_engine.h"

#include <cstring>
#include <string_view>

#include "core/error.h"
#include "io/io_engine_impls.h"

namespace sluice {
namespace {

// A bound on rings and thread pools alike: beyond it io_uring refuses the ring (its own limit is
// 32768 entries) and the pool would be thousands of threads mostly waiting on one device.
constexpr int kMaxQueueDepth = 4096;

}  // namespace

std::unique_ptr<IoEngine> make_io_engine(IoEngineKind kind, int queue_depth) {
  if (queue_depth < 1 || queue_depth > kMaxQueueDepth) {
    fail("io: queue depth ", queue_depth, " is outside [1, ", kMaxQueueDepth, "]");
  }
  if (kind == IoEngineKind::kPread) return make_pread_io_engine(queue_depth);
  int error = 0;
  std::unique_ptr<IoEngine> engine = make_uring_io_engine(queue_depth, &error);
  if (engine) return engine;
  if (kind == IoEngineKind::kUring) {
    fail("io: io_uring is unavailable (io_uring_queue_init with ", queue_depth,
         " entries: ", std::strerror(error), "); use the pread engine");
  }
  return make_pread_io_engine(queue_depth);
}

IoEngineKind parse_io_engine_kind(const char* text) {
  std::string_view value = text ? text : "";
  if (value == "auto") return IoEngineKind::kAuto;
  if (value == "io_uring") return IoEngineKind::kUring;
  if (value == "pread") return IoEngineKind::kPread;
  fail("io: unknown I/O engine '", value, "' (expected auto, io_uring or pread)");
}

}  // namespace sluice
