// tokenizer_speed_harness: times encoding alone, for bench/tokenizer_speed.py. Loads the
// tokenizer once through the public API, reads the corpus (one JSON string per line, or
// {"text": …} objects), then encodes every string PASSES times on one thread and prints one JSON
// object: bytes per pass, tokens per pass, load seconds and the seconds of each pass.
//   tokenizer_speed_harness (--tokenizer tokenizer.json | --model FILE) CORPUS.jsonl PASSES
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sluice/error.h"
#include "sluice/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::vector<std::string> read_corpus(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw sluice::Error("cannot open " + path);
  std::vector<std::string> texts;
  std::string line;
  while (std::getline(in, line)) {
    const auto value = nlohmann::json::parse(line);
    texts.push_back(value.is_string() ? value.get<std::string>()
                                      : value.at("text").get<std::string>());
  }
  return texts;
}

int run(int argc, char** argv) {
  if (argc != 5 || (std::string(argv[1]) != "--tokenizer" && std::string(argv[1]) != "--model")) {
    std::fprintf(stderr,
                 "usage: %s (--tokenizer tokenizer.json | --model FILE) CORPUS.jsonl PASSES\n",
                 argv[0]);
    return 2;
  }
  const auto load_start = Clock::now();
  const sluice::TextTokenizer tokenizer = std::string(argv[1]) == "--model"
                                              ? sluice::TextTokenizer::from_model_file(argv[2])
                                              : sluice::TextTokenizer::from_tokenizer_json(argv[2]);
  const double load_seconds = seconds_since(load_start);
  const std::vector<std::string> texts = read_corpus(argv[3]);
  const int passes = std::stoi(argv[4]);
  size_t bytes = 0;
  for (const auto& text : texts) bytes += text.size();

  nlohmann::json report = {
      {"strings", texts.size()}, {"bytes", bytes}, {"load_seconds", load_seconds}};
  size_t tokens = 0;
  for (int pass = 0; pass < passes; ++pass) {
    tokens = 0;
    const auto start = Clock::now();
    // parse_special on: Hugging Face's encode always matches added tokens.
    for (const auto& text : texts) tokens += tokenizer.encode(text, true, false).size();
    report["pass_seconds"].push_back(seconds_since(start));
  }
  report["tokens"] = tokens;
  std::printf("%s\n", report.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokenizer_speed_harness: %s\n", e.what());
    return 1;
  }
}
