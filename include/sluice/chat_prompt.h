// A conversation as a model sees it: messages (and tools) rendered with the model's own chat
// template, or an override, then tokenized with the BOS rule llama.cpp's chat applies. The CLI's
// chat and the server's chat endpoints both build their prompts here, so they agree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sluice/engine.h"

namespace sluice {

struct ChatPromptOptions {
  std::string tools_json;          // JSON array of tool definitions; empty: no tools
  std::string extra_context_json;  // JSON object of further template variables
  std::string template_override;   // Jinja text used instead of the model's; empty: model's
  bool use_template = true;        // false: plain text (contents joined by blank lines)
  bool add_generation_prompt = true;
};

struct ChatPrompt {
  bool templated = false;  // false when the model has no template (or use_template was off)
  std::string text;
  std::vector<int32_t> tokens;
};

// `messages_json`: a JSON array of {"role", "content", …} objects as Hugging Face templates take
// them. Throws sluice::Error with the template's own message when rendering fails.
ChatPrompt build_chat_prompt(const Model& model, const std::string& messages_json,
                             const ChatPromptOptions& options = {});

}  // namespace sluice
