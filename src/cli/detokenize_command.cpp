// `sluice detokenize (--model FILE | --tokenizer tokenizer.json) [--skip-special] IDS…`: writes
// the text the ids stand for to stdout exactly, adding nothing (no newline). With --jsonl, one
// JSON array of ids per stdin line in, one JSON string per line out.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/tokenizer_source.h"
#include "sluice/error.h"
#include "sluice/tokenizer.h"

namespace sluice::cli {
namespace {

struct DetokenizeOptions {
  TokenizerSource source;
  bool skip_special = false;
  bool jsonl = false;
  std::vector<int64_t> ids;
};

std::vector<int32_t> checked_ids(const std::vector<int64_t>& ids) {
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (int64_t id : ids) {
    if (id < INT32_MIN || id > INT32_MAX)
      throw Error("token id " + std::to_string(id) + " is out of range");
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

void run_jsonl(const TextTokenizer& tokenizer, bool skip_special) {
  std::string line;
  for (size_t number = 1; std::getline(std::cin, line); ++number) {
    const std::string where = "stdin line " + std::to_string(number);
    nlohmann::json value;
    try {
      value = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw Error(where + ": not JSON (" + e.what() + ")");
    }
    std::vector<int64_t> ids;
    if (!value.is_array()) throw Error(where + ": expected a JSON array of token ids");
    for (const auto& id : value) {
      if (!id.is_number_integer()) throw Error(where + ": expected a JSON array of token ids");
      ids.push_back(id.get<int64_t>());
    }
    // A slice of ids may end inside a UTF-8 sequence; JSON cannot carry those bytes, so they
    // become U+FFFD here (the plain form writes the bytes as they are).
    const std::string text = tokenizer.decode(checked_ids(ids), skip_special);
    const std::string out =
        nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
  }
}

}  // namespace

Command add_detokenize_command(CLI::App& parent) {
  auto options = std::make_shared<DetokenizeOptions>();
  CLI::App* app = parent.add_subcommand(
      "detokenize", "Write the text of token ids to stdout exactly, with no newline added");
  add_tokenizer_source_options(*app, options->source);
  app->add_flag("--skip-special", options->skip_special,
                "Leave out control tokens (BOS, EOS, <|im_start|> …)");
  app->add_flag("--jsonl", options->jsonl,
                "Read one JSON array of ids per stdin line, write one JSON string per line "
                "(bytes that are not UTF-8 become U+FFFD)");
  app->add_option("ids", options->ids, "Token ids");
  return {app, [options] {
            const TextTokenizer tokenizer = open_tokenizer(options->source);
            if (options->jsonl) {
              if (!options->ids.empty()) throw Error("--jsonl reads stdin; do not also give IDS");
              run_jsonl(tokenizer, options->skip_special);
            } else {
              const std::string text =
                  tokenizer.decode(checked_ids(options->ids), options->skip_special);
              std::fwrite(text.data(), 1, text.size(), stdout);
            }
            finish_stdout();
            return 0;
          }};
}

}  // namespace sluice::cli
