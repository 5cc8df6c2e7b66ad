// build_chat_prompt: template output is tokenized with parse_special (its <|im_start|>-style
// markers must become control ids, as Hugging Face and llama.cpp do); plain text is not, so a
// user's literal "<s>" stays text.
#include "sluice/chat_prompt.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "sluice/chat_template.h"

namespace sluice {
namespace {

// The public tokenizer does not expose add_bos; encoding nothing with add_special shows it.
bool adds_bos(const TextTokenizer& tokenizer) {
  const std::vector<int32_t> probe = tokenizer.encode("", false, true);
  return tokenizer.bos_id() && !probe.empty() && probe.front() == *tokenizer.bos_id();
}

std::string plain_text(const nlohmann::json& messages) {
  std::string text;
  for (const nlohmann::json& message : messages) {
    const nlohmann::json* content =
        message.is_object() && message.contains("content") ? &message["content"] : nullptr;
    if (content == nullptr || !content->is_string()) continue;
    if (!text.empty()) text += "\n\n";
    text += content->get<std::string>();
  }
  return text;
}

}  // namespace

ChatPrompt build_chat_prompt(const Model& model, const std::string& messages_json,
                             const ChatPromptOptions& options) {
  const TextTokenizer& tokenizer = model.tokenizer();
  const std::string& template_text =
      options.template_override.empty() ? model.chat_template() : options.template_override;
  ChatPrompt prompt;
  prompt.templated = options.use_template && !template_text.empty();
  if (prompt.templated) {
    ChatTemplateOptions render;
    render.add_generation_prompt = options.add_generation_prompt;
    render.tools_json = options.tools_json;
    render.extra_context_json = options.extra_context_json;
    if (auto id = tokenizer.bos_id()) render.bos_token = tokenizer.token_text(*id);
    if (auto id = tokenizer.eos_id()) render.eos_token = tokenizer.token_text(*id);
    prompt.text = render_chat_template(template_text, messages_json, render);
  } else {
    const nlohmann::json messages = nlohmann::json::parse(messages_json, nullptr, false);
    if (!messages.is_array()) fail("chat messages must be a JSON array");
    prompt.text = plain_text(messages);
  }
  prompt.tokens = tokenizer.encode(prompt.text, prompt.templated, false);
  // BOS as llama.cpp's chat adds it: when the tokenizer says add_bos, unless the template
  // already wrote the BOS text (Llama 3 style "{{ bos_token }}…"), which would make it appear
  // twice. EOS is never added: the prompt must end open for the answer.
  if (auto bos = tokenizer.bos_id(); bos && adds_bos(tokenizer)) {
    if (!(prompt.templated && prompt.text.starts_with(tokenizer.token_text(*bos)))) {
      prompt.tokens.insert(prompt.tokens.begin(), *bos);
    }
  }
  return prompt;
}

}  // namespace sluice
