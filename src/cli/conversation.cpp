// Rendering and tokenizing a conversation. Template output is tokenized with parse_special (its
// <|im_start|>-style markers must become control ids, as Hugging Face and llama.cpp do); plain
// text is not, so a user's literal "<s>" stays text.
#include "cli/conversation.h"

#include <nlohmann/json.hpp>

#include "sluice/chat_template.h"

namespace sluice::cli {
namespace {

// The public tokenizer does not expose add_bos; encoding nothing with add_special shows it.
bool adds_bos(const TextTokenizer& tokenizer) {
  const std::vector<int32_t> probe = tokenizer.encode("", false, true);
  return tokenizer.bos_id() && !probe.empty() && probe.front() == *tokenizer.bos_id();
}

}  // namespace

Conversation::Conversation(const Model& model, std::string system, bool use_template)
    : model_(model),
      system_(std::move(system)),
      templated_(use_template && !model.chat_template().empty()),
      tokenizer_adds_bos_(adds_bos(model.tokenizer())) {}

void Conversation::add(std::string role, std::string content) {
  messages_.emplace_back(std::move(role), std::move(content));
}

void Conversation::drop_last() {
  if (!messages_.empty()) messages_.pop_back();
}

void Conversation::clear() {
  messages_.clear();
}

std::string Conversation::render() const {
  if (!templated_) {
    std::string text = system_;
    for (const auto& [role, content] : messages_) text += (text.empty() ? "" : "\n\n") + content;
    return text;
  }
  const TextTokenizer& tokenizer = model_.tokenizer();
  nlohmann::json messages = nlohmann::json::array();
  if (!system_.empty()) messages.push_back({{"role", "system"}, {"content", system_}});
  for (const auto& [role, content] : messages_) {
    messages.push_back({{"role", role}, {"content", content}});
  }
  ChatTemplateOptions options;
  options.add_generation_prompt = true;
  if (auto id = tokenizer.bos_id()) options.bos_token = tokenizer.token_text(*id);
  if (auto id = tokenizer.eos_id()) options.eos_token = tokenizer.token_text(*id);
  // Typed bytes need not be UTF-8; JSON must be, so invalid sequences become U+FFFD.
  const std::string json = messages.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return render_chat_template(model_.chat_template(), json, options);
}

std::vector<int32_t> Conversation::tokens() const {
  const TextTokenizer& tokenizer = model_.tokenizer();
  const std::string text = render();
  std::vector<int32_t> ids = tokenizer.encode(text, templated_, false);
  // BOS as llama.cpp's chat adds it: when the tokenizer says add_bos, unless the template already
  // wrote the BOS text (Llama 3 style "{{ bos_token }}…"), which would make it appear twice.
  // EOS is never added: the prompt must end open for the answer.
  if (auto bos = tokenizer.bos_id(); bos && tokenizer_adds_bos_) {
    if (!(templated_ && text.starts_with(tokenizer.token_text(*bos))))
      ids.insert(ids.begin(), *bos);
  }
  return ids;
}

}  // namespace sluice::cli
