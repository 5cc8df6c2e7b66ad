// The user's turns for the interactive chat, read from stdin: multi-line input (a line ending in
// `\` continues; a block opens and closes with `"""`), the `> ` prompt only on a terminal, and a
// Ctrl-C while waiting reported as such instead of being lost in a blocked read.
#pragma once

#include <string>

namespace sluice::cli {

enum class InputStatus { kText, kEof, kInterrupted };

struct UserInput {
  InputStatus status = InputStatus::kEof;
  std::string text;
  int interrupts = 0;  // kInterrupted: how many Ctrl-Cs (two at once mean "exit")
};

class InputReader {
 public:
  explicit InputReader(int fd);
  bool interactive() const { return tty_; }  // stdin is a terminal: prompts are shown
  // One turn; a turn cut short by end of input is still returned, kEof comes on the next call.
  // kInterrupted drops what was typed of the turn so far.
  UserInput read_turn();

 private:
  enum class LineStatus { kLine, kEof, kInterrupted };
  LineStatus read_line(std::string& line);
  void show_prompt(const char* marker) const;

  int fd_;
  bool tty_;
  bool eof_ = false;
  std::string buffer_;  // bytes read but not yet returned as lines
  int interrupts_ = 0;  // Ctrl-Cs behind the last kInterrupted
};

}  // namespace sluice::cli
