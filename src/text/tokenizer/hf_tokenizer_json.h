// The Hugging Face adapter: a `tokenizer.json` (+ `tokenizer_config.json`, + a side-car
// `chat_template.jinja`) becomes a TokenizerSpec that encodes exactly as the `tokenizers` package
// does. It maps the pipelines real checkpoints use (byte-level BPE with Split/Digits/ByteLevel
// pre-tokenizers; SentencePiece-style BPE with byte fallback) and refuses anything else by name.
// Knows nothing of GGUF; reads files with the standard library only.
#pragma once

#include <string>
#include <string_view>

#include "text/tokenizer/tokenizer_spec.h"

namespace sluice::text {

// The two JSON documents as text. `config_json` may be empty (no tokenizer_config.json);
// `chat_template` (from chat_template.jinja) wins over the config's when not empty. `source`
// names the file in error messages. Throws sluice::Error naming the field that cannot be mapped.
TokenizerSpec hf_tokenizer_spec_from_json(std::string_view tokenizer_json,
                                          std::string_view config_json,
                                          std::string_view chat_template, std::string_view source);

// `path` is a tokenizer.json file or a directory holding one; tokenizer_config.json and
// chat_template.jinja are read from the same directory when present.
TokenizerSpec load_hf_tokenizer_spec(const std::string& path);

}  // namespace sluice::text
