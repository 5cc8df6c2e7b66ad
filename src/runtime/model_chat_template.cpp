// read_model_chat_template: the chat template and BOS/EOS token texts a GGUF file carries
// (tokenizer.chat_template, tokenizer.ggml.{bos,eos}_token_id into tokenizer.ggml.tokens).
// Header only; rendering lives in text/chat.
#include <cstdint>
#include <optional>

#include "core/error.h"
#include "format/model_file.h"
#include "format/model_file_open.h"
#include "sluice/chat_template.h"

namespace sluice {
namespace {

std::optional<std::string> token_text(const ModelFile& file, const char* id_key) {
  const MetaValue* id = file.find(id_key);
  const MetaValue* tokens = file.find("tokenizer.ggml.tokens");
  if (!id || !tokens || !tokens->strings()) return std::nullopt;
  std::optional<uint64_t> index;
  if (auto v = id->as<uint32_t>()) index = *v;
  if (auto v = id->as<int32_t>()) index = static_cast<uint64_t>(*v);
  if (auto v = id->as<uint64_t>()) index = *v;
  if (!index || *index >= tokens->strings()->size()) return std::nullopt;
  return (*tokens->strings())[*index];
}

}  // namespace

ModelChatTemplate read_model_chat_template(const std::string& path) {
  ModelFile file = read_model_file(path);
  const MetaValue* text = file.find("tokenizer.chat_template");
  if (!text || !text->as_string())
    fail(path, ": no tokenizer.chat_template in the model's metadata");
  ModelChatTemplate out;
  out.template_text = *text->as_string();
  out.bos_token = token_text(file, "tokenizer.ggml.bos_token_id");
  out.eos_token = token_text(file, "tokenizer.ggml.eos_token_id");
  return out;
}

}  // namespace sluice
