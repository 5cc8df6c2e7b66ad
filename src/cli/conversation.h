// A chat of `sluice run`: the messages so far, rendered and tokenized by build_chat_prompt (the
// model's own template with add_generation_prompt, or plain text for a model without one). The
// whole conversation is rendered every turn; the Session reuses the prefix it already holds.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sluice/engine.h"

namespace sluice::cli {

class Conversation {
 public:
  // `use_template` false (or a model without a template): contents joined by blank lines.
  Conversation(const Model& model, std::string system, bool use_template);

  bool templated() const { return templated_; }
  void add(std::string role, std::string content);
  void drop_last();  // forgets the last message (a turn that failed or was cancelled)
  void clear();      // a new conversation: only the system message stays
  std::vector<int32_t> tokens() const;

 private:
  const Model& model_;
  std::string system_;
  std::vector<std::pair<std::string, std::string>> messages_;  // (role, content), no system
  bool templated_;
};

}  // namespace sluice::cli
