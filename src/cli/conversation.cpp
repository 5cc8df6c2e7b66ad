// Conversation: keeps the messages and hands them to build_chat_prompt each turn.
#include "cli/conversation.h"

#include <nlohmann/json.hpp>

#include "sluice/chat_prompt.h"

namespace sluice::cli {

Conversation::Conversation(const Model& model, std::string system, bool use_template)
    : model_(model),
      system_(std::move(system)),
      templated_(use_template && !model.chat_template().empty()) {}
void Conversation::add(std::string role, std::string content) {
  messages_.emplace_back(std::move(role), std::move(content));
}

void Conversation::drop_last() {
  if (!messages_.empty()) messages_.pop_back();
}

void Conversation::clear() {
  messages_.clear();
}

std::vector<int32_t> Conversation::tokens() const {
  nlohmann::json messages = nlohmann::json::array();
  if (!system_.empty()) messages.push_back({{"role", "system"}, {"content", system_}});
  for (const auto& [role, content] : messages_) {
    messages.push_back({{"role", role}, {"content", content}});
  }
  ChatPromptOptions options;
  options.use_template = templated_;
  // Typed bytes need not be UTF-8; JSON must be, so invalid sequences become U+FFFD.
  const std::string json = messages.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return build_chat_prompt(model_, json, options).tokens;
}

}  // namespace sluice::cli
