// The tokenizer source options that `tokenize` and `detokenize` share: exactly one of
// --model FILE (GGUF, safetensors file or snapshot) and --tokenizer tokenizer.json.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "sluice/tokenizer.h"

namespace sluice::cli {

struct TokenizerSource {
  std::string model;
  std::string tokenizer_json;
};

void add_tokenizer_source_options(CLI::App& app, TokenizerSource& source);
TextTokenizer open_tokenizer(const TokenizerSource& source);
// Flushes stdout; a failed write (closed pipe, full disk) is a sluice::Error.
void finish_stdout();

}  // namespace sluice::cli
