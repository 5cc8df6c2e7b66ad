// Shared by the tokenize and detokenize subcommands: choosing the tokenizer source, and
// reporting write failures on stdout as errors rather than exiting 0 with truncated output.
#include "cli/tokenizer_source.h"

#include <cstdio>

#include "sluice/error.h"

namespace sluice::cli {

void add_tokenizer_source_options(CLI::App& app, TokenizerSource& source) {
  auto* group = app.add_option_group("source", "Where the tokenizer comes from (one of)");
  group->add_option("--model,-m", source.model,
                    "GGUF file, or safetensors file / snapshot directory with a tokenizer.json");
  group->add_option("--tokenizer,-t", source.tokenizer_json,
                    "Hugging Face tokenizer.json (tokenizer_config.json beside it is read too)");
  group->require_option(1);
}

TextTokenizer open_tokenizer(const TokenizerSource& source) {
  return source.model.empty() ? TextTokenizer::from_tokenizer_json(source.tokenizer_json)
                              : TextTokenizer::from_model_file(source.model);
}

void finish_stdout() {
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) throw Error("cannot write to stdout");
}

}  // namespace sluice::cli
