// Reads stdin with poll(2)+read(2) rather than std::getline: the SIGINT handler may run on any of
// the engine's threads, so a blocked read would not always wake; polling every 100 ms and asking
// the interrupt counters notices a Ctrl-C promptly either way.
#include "cli/line_input.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "cli/interrupt.h"

namespace sluice::cli {
namespace {

constexpr std::string_view kFence = "\"\"\"";

bool ends_with(const std::string& text, std::string_view tail) {
  return text.size() >= tail.size() &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

InputReader::InputReader(int fd) : fd_(fd), tty_(::isatty(fd) == 1) {}

void InputReader::show_prompt(const char* marker) const {
  if (!tty_) return;
  std::fputs(marker, stdout);
  std::fflush(stdout);
}

InputReader::LineStatus InputReader::read_line(std::string& line) {
  for (;;) {
    if (size_t end = buffer_.find('\n'); end != std::string::npos) {
      line = buffer_.substr(0, end);
      buffer_.erase(0, end + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      return LineStatus::kLine;
    }
    if (eof_) {
      if (buffer_.empty()) return LineStatus::kEof;
      line.swap(buffer_);  // a last line without a newline
      buffer_.clear();
      return LineStatus::kLine;
    }
    interrupts_ = take_idle_interrupts();
    if (interrupts_ > 0) return LineStatus::kInterrupted;
    pollfd waiting = {fd_, POLLIN, 0};
    int ready = ::poll(&waiting, 1, 100);
    if (ready <= 0) continue;  // timeout or EINTR: look at the interrupt counter again
    char chunk[4096];
    ssize_t n = ::read(fd_, chunk, sizeof chunk);
    if (n > 0) {
      buffer_.append(chunk, static_cast<size_t>(n));
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      eof_ = true;  // end of input, or an unreadable stdin: either way the chat is over
    }
  }
}

UserInput InputReader::read_turn() {
  std::string text;
  bool first = true;
  bool block = false;  // inside a """ … """ block
  for (;;) {
    show_prompt(first ? "> " : "... ");
    std::string line;
    LineStatus status = read_line(line);
    if (status == LineStatus::kInterrupted) return {InputStatus::kInterrupted, {}, interrupts_};
    if (status == LineStatus::kEof) {
      if (first) return {InputStatus::kEof, {}};
      return {InputStatus::kText, text};
    }
    if (first && line.starts_with(kFence)) {
      block = true;
      line.erase(0, kFence.size());
    } else if (!block && ends_with(line, "\\")) {
      line.pop_back();
      text += line + "\n";
      first = false;
      continue;
    }
    if (block && !(first && line.empty()) && ends_with(line, kFence)) {
      text += line.substr(0, line.size() - kFence.size());
      if (ends_with(text, "\n")) text.pop_back();  // the newline before a closing line
      return {InputStatus::kText, text};
    }
    first = false;
    if (!block) return {InputStatus::kText, text + line};
    if (!(text.empty() && line.empty())) text += line + "\n";
  }
}

}  // namespace sluice::cli
