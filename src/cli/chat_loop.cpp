// The chat loop. Answers go to stdout and nothing else does, so `sluice run M < questions`
// leaves only answers there; prompts appear on a terminal only; notes, stats and per-turn errors
// go to stderr. A failed turn (template refusal, context full) is reported and forgotten, and
// the chat goes on: it is a boundary the user can recover from.
#include "cli/chat_loop.h"

#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>

#include "cli/interrupt.h"
#include "cli/line_input.h"
#include "sluice/error.h"

namespace sluice::cli {
namespace {

constexpr int kExitInterrupted = 130;  // the shell's convention for "ended by SIGINT"

constexpr const char* kHelp =
    "Type a message and press Enter. End a line with \\ to continue on the next one, or put\n"
    "several lines between two lines of \"\"\".\n"
    "  /clear   start a new conversation\n"
    "  /stats   speed and memory of the last answer\n"
    "  /help    this text\n"
    "  /bye     exit (so do Ctrl-D and two Ctrl-C in a row)\n"
    "Ctrl-C during an answer stops it; that exchange is left out of the conversation.\n";

void note(const char* text) {
  std::fprintf(stderr, "%s\n", text);
}

std::string trim(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return {};
  return text.substr(begin, text.find_last_not_of(" \t\r\n") - begin + 1);
}

class Chat {
 public:
  Chat(Session& session, Conversation& conversation, const AnswerSettings& settings)
      : session_(session), conversation_(conversation), settings_(settings) {}

  int run();

 private:
  bool command(const std::string& word);  // false: /bye
  void answer(const std::string& text);
  void answer_turn(const std::string& text);

  Session& session_;
  Conversation& conversation_;
  const AnswerSettings& settings_;
  std::optional<GenerationStats> last_stats_;
  bool interrupted_ = false;  // the last thing that happened was a Ctrl-C
};

int Chat::run() {
  InputReader input(STDIN_FILENO);
  if (input.interactive()) {
    std::fprintf(stderr, "Chatting with %s. /help for help, /bye or Ctrl-D to exit.\n",
                 session_.model().info().name.c_str());
  }
  for (;;) {
    UserInput in = input.read_turn();
    if (in.status == InputStatus::kEof) {
      if (input.interactive()) std::fputs("\n", stdout);
      return 0;
    }
    if (in.status == InputStatus::kInterrupted) {
      if (interrupted_ || in.interrupts > 1) {
        if (input.interactive()) std::fputs("\n", stdout);  // leave the shell a fresh line
        return kExitInterrupted;
      }
      interrupted_ = true;
      note("\n(Ctrl-C again, /bye or Ctrl-D to exit)");
      continue;
    }
    interrupted_ = false;
    const std::string text = trim(in.text);
    if (text.empty()) continue;
    // A single word starting with '/' is a command; "/etc/hosts is what?" is a question.
    if (text[0] == '/' && text.find_first_of(" \t\n") == std::string::npos) {
      if (!command(text)) return 0;
      continue;
    }
    answer(in.text);
    if (exit_requested()) return kExitInterrupted;
  }
}

bool Chat::command(const std::string& word) {
  if (word == "/bye") return false;
  if (word == "/clear") {
    // The session keeps its cache: the next prompt shares the template's opening with it.
    conversation_.clear();
    note("(new conversation)");
  } else if (word == "/help") {
    std::fputs(kHelp, stderr);
  } else if (word == "/stats") {
    if (last_stats_) {
      std::fputs(format_stats(*last_stats_).c_str(), stderr);
    } else {
      note("(no answer yet)");
    }
  } else {
    std::fprintf(stderr, "unknown command %s; /help lists them\n", word.c_str());
  }
  return true;
}

void Chat::answer(const std::string& text) {
  try {
    answer_turn(text);
  } catch (const Error& e) {
    if (std::ferror(stdout)) throw;  // the reader is gone: nothing more to say to anyone
    std::fprintf(stderr, "\nsluice: error: %s\n", e.what());
  }
}

void Chat::answer_turn(const std::string& text) {
  conversation_.add("user", text);
  // The answer starts here, not at generate: a Ctrl-C while the prompt renders cancels it too.
  const std::atomic<bool>* cancel = begin_answer();
  GenerationResult result;
  try {
    GenerationRequest request = make_request(settings_, conversation_.tokens(), session_.n_ctx());
    result = stream_answer(session_, request, cancel);
  } catch (...) {
    end_answer();
    conversation_.drop_last();
    throw;
  }
  const bool cancelled = end_answer() || result.stop_reason == StopReason::kCancelled;
  std::fputs("\n", stdout);
  std::fflush(stdout);
  last_stats_ = result.stats;
  if (settings_.print_stats) std::fputs(format_stats(result.stats).c_str(), stderr);
  if (cancelled) {
    conversation_.drop_last();
    interrupted_ = true;
    note("(answer cancelled)");
    return;
  }
  if (result.stop_reason == StopReason::kContextFull) {
    note("(context full: /clear starts a new conversation)");
  }
  conversation_.add("assistant", result.text);
}

}  // namespace

int run_chat(Session& session, Conversation& conversation, const AnswerSettings& settings) {
  Chat chat(session, conversation, settings);
  return chat.run();
}

}  // namespace sluice::cli
