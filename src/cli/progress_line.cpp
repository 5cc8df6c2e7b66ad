// ProgressLine's output.
#include "cli/progress_line.h"

#include <unistd.h>

#include <cstdio>

#include "cli/interrupt.h"
#include "sluice/error.h"

namespace sluice::cli {

namespace {
constexpr uint64_t kProgressMinBytes = uint64_t{256} << 20;
}

ProgressLine::ProgressLine(std::string label)
    : label_(std::move(label)), tty_(::isatty(STDERR_FILENO) == 1), start_(Clock::now()) {
  install_interrupt_handler();
}

void ProgressLine::update(uint64_t done, uint64_t total) {
  if (take_idle_interrupts() > 0) {
    if (tty_) std::fputc('\n', stderr);
    throw Error(label_ + ": interrupted; nothing was written");
  }
  if (total < kProgressMinBytes) return;
  const auto now = Clock::now();
  const int tenth = int(done * 10 / total);
  if (tty_ ? (now - last_ < std::chrono::milliseconds(500) && done != total)
           : tenth == last_tenth_) {
    return;
  }
  last_ = now;
  last_tenth_ = tenth;
  const double seconds = std::chrono::duration<double>(now - start_).count();
  std::fprintf(stderr, "%s%s: %.2f / %.2f GB (%d%%), %.0f MB/s%s", tty_ ? "\r" : "", label_.c_str(),
               double(done) / 1e9, double(total) / 1e9, int(done * 100 / total),
               seconds > 0 ? double(done) / 1e6 / seconds : 0.0, tty_ ? "" : "\n");
  if (tty_ && done == total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

}  // namespace sluice::cli
