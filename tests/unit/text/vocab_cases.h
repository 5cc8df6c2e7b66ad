// Reads llama.cpp's tokenizer test files (testdata/vocab: FILE.gguf.inp / FILE.gguf.out) for the
// tokenizer tests of every kind, and prints id lists so gtest failures show them side by side.
// Test-only helper; knows nothing of tokenizers beyond TokenId.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "text/tokenizer/tokenizer_spec.h"

namespace sluice::text::test_support {

struct VocabCase {
  std::string text;
  std::vector<TokenId> ids;  // what Hugging Face tokenizers produced for `text`
};

inline std::string read_binary_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// testdata/vocab/README.md: each text is followed by "\n__ggml_vocab_test__\n"; the .out has one
// line of space-separated ids per text. A line count that differs from the text count fails.
inline std::vector<VocabCase> read_vocab_cases(const std::filesystem::path& inp,
                                               const std::filesystem::path& out) {
  const std::string all = read_binary_file(inp);
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<VocabCase> cases;
  for (size_t start = 0, end; (end = all.find(separator, start)) != std::string::npos;
       start = end + separator.size()) {
    cases.push_back({all.substr(start, end - start), {}});
  }
  std::istringstream lines(read_binary_file(out));
  std::string line;
  size_t i = 0;
  for (; std::getline(lines, line); ++i) {
    if (i >= cases.size()) break;
    std::istringstream ids(line);
    for (TokenId id; ids >> id;) cases[i].ids.push_back(id);
  }
  EXPECT_EQ(i, cases.size()) << out << ": line count differs from the texts in " << inp;
  return cases;
}

inline std::string show_ids(const std::vector<TokenId>& ids) {
  std::string text;
  for (const TokenId id : ids) text += " " + std::to_string(id);
  return text;
}

}  // namespace sluice::text::test_support
