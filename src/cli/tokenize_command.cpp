// `sluice tokenize (--model FILE | --tokenizer tokenizer.json) [--parse-special] [--add-special]
// [--jsonl] [TEXT]`: prints the ids of TEXT (or of all of stdin, as raw bytes) as one JSON
// array; with --jsonl, one JSON string per stdin line in, one JSON array per line out.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/tokenizer_source.h"
#include "sluice/error.h"
#include "sluice/tokenizer.h"

namespace sluice::cli {
namespace {

struct TokenizeOptions {
  TokenizerSource source;
  bool parse_special = false;
  bool add_special = false;
  bool jsonl = false;
  std::optional<std::string> text;
};

void write_ids(const std::vector<int32_t>& ids) {
  std::string line = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) line += ", ";
    line += std::to_string(ids[i]);
  }
  line += "]\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
}

// One JSON string per line; a line that is not one is a user error naming the line.
int run_jsonl(const TextTokenizer& tokenizer, const TokenizeOptions& options) {
  std::string line;
  for (size_t number = 1; std::getline(std::cin, line); ++number) {
    nlohmann::json value;
    try {
      value = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw Error("stdin line " + std::to_string(number) + ": not JSON (" + e.what() + ")");
    }
    if (!value.is_string()) {
      throw Error("stdin line " + std::to_string(number) + ": expected a JSON string");
    }
    write_ids(tokenizer.encode(value.get_ref<const std::string&>(), options.parse_special,
                               options.add_special));
    // Line-at-a-time clients wait for each answer before sending the next line.
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

Command add_tokenize_command(CLI::App& parent) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* app = parent.add_subcommand("tokenize", "Print the token ids of a text as JSON");
  add_tokenizer_source_options(*app, options->source);
  app->add_flag("--parse-special", options->parse_special,
                "Recognise special-token texts (<|im_start|>, <s> …) in the input; without it "
                "only non-special added tokens are matched");
  app->add_flag("--add-special", options->add_special,
                "Add BOS/EOS as the tokenizer's add_bos/add_eos settings say");
  app->add_flag("--jsonl", options->jsonl,
                "Read one JSON string per stdin line, write one JSON array of ids per line");
  app->add_option("text", options->text, "Text to tokenize (default: all of stdin, as raw bytes)");
  return {app, [options] {
            const TextTokenizer tokenizer = open_tokenizer(options->source);
            if (options->jsonl) {
              if (options->text) throw Error("--jsonl reads stdin; do not also give TEXT");
              run_jsonl(tokenizer, *options);
            } else {
              std::string text = options->text.value_or(std::string(
                  std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()));
              write_ids(tokenizer.encode(text, options->parse_special, options->add_special));
            }
            finish_stdout();
            return 0;
          }};
}

}  // namespace sluice::cli
