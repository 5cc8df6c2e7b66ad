// Chat templates through the public API: render a model's Jinja chat template exactly as
// Hugging Face's apply_chat_template does with Python jinja2, and read the template (and BOS/EOS
// token texts) a GGUF model carries. The CLI and the server use this alone.
#pragma once

#include <optional>
#include <string>

namespace sluice {

struct ChatTemplateOptions {
  std::string tools_json;  // JSON array of tool definitions; empty → `tools` is None
  bool add_generation_prompt = false;
  std::optional<std::string> bos_token;  // absent → `bos_token` is undefined
  std::optional<std::string> eos_token;
  std::string now;  // fixed clock for strftime_now, "2026-01-15T10:00:00"; empty → now
  std::string extra_context_json;  // JSON object of further variables (e.g. enable_thinking)
};

// Renders `template_text` with `messages_json` (a JSON array of messages). Throws sluice::Error
// carrying the message Python would raise (raise_exception's text, an undefined, a TypeError…).
std::string render_chat_template(const std::string& template_text, const std::string& messages_json,
                                 const ChatTemplateOptions& options);

struct ModelChatTemplate {
  std::string template_text;             // tokenizer.chat_template
  std::optional<std::string> bos_token;  // text of tokenizer.ggml.bos_token_id, when present
  std::optional<std::string> eos_token;
};

// Reads tokenizer.chat_template and the BOS/EOS token texts from a GGUF file (header only).
// Throws sluice::Error when the file is bad or has no chat template.
ModelChatTemplate read_model_chat_template(const std::string& path);

}  // namespace sluice
