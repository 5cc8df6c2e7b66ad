// ProgressLine: "label: done / total GB (n%), rate" on stderr for long writes — rewritten in
// place at most twice a second on a terminal, one line per tenth elsewhere (a log stays short).
// It also makes Ctrl-C stop the write cleanly: update() throws, so the writer unwinds and its
// temporary file is removed instead of left behind by a killed process.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace sluice::cli {

class ProgressLine {
 public:
  explicit ProgressLine(std::string label);  // installs the Ctrl-C handler (cli/interrupt.h)
  // Nothing for totals under 256 MiB: they finish before a line would say anything. Throws
  // sluice::Error once Ctrl-C was pressed.
  void update(uint64_t done, uint64_t total);

 private:
  using Clock = std::chrono::steady_clock;
  std::string label_;
  bool tty_;
  Clock::time_point start_;
  Clock::time_point last_{};
  int last_tenth_ = 0;  // a line per tenth from 10%: the first pieces say nothing of the rate
};

}  // namespace sluice::cli
