// SentencePiece through the whole Tokenizer, built by the production adapters: the GGUF one
// (runtime/tokenizer_from_model_file) over llama.cpp's vocab corpus, and the tokenizer.json one
// (text/tokenizer/hf_tokenizer_json) for llama2 and gemma3 with ids from Hugging Face
// `tokenizers`. Checks the dummy-prefix, special-token and decode rules end to end.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "format/gguf/gguf_reader.h"
#include "runtime/tokenizer_from_model_file.h"
#include "text/tokenizer/hf_tokenizer_json.h"
#include "text/tokenizer/tokenizer.h"
#include "unit/text/vocab_cases.h"

namespace sluice::text {
namespace {

namespace fs = std::filesystem;

const fs::path kVocabDir = fs::path(SLUICE_TESTDATA_DIR) / "vocab";
const fs::path kTokenizersDir = fs::path(SLUICE_TESTDATA_DIR) / "tokenizers";

using test_support::read_vocab_cases;
using test_support::show_ids;

Tokenizer gguf_tokenizer(const fs::path& path) {
  return Tokenizer(tokenizer_spec_from_gguf(read_gguf(path.string())));
}

class SentencePieceGgufCorpus : public ::testing::TestWithParam<const char*> {};

// llama.cpp's test-tokenizer-0: parse_special and add_special off, ids exactly as listed.
TEST_P(SentencePieceGgufCorpus, EncodesAndDecodesEveryText) {
  const fs::path gguf = kVocabDir / GetParam();
  const std::string base = (kVocabDir / GetParam()).string();
  if (!fs::exists(gguf) || !fs::exists(base + ".inp") || !fs::exists(base + ".out"))
    GTEST_SKIP() << "test data absent: " << gguf << " (+ .inp/.out)";
  const Tokenizer tokenizer = gguf_tokenizer(gguf);
  const auto cases = read_vocab_cases(base + ".inp", base + ".out");
  size_t n = 0;
  for (const auto& [text, expected] : cases) {
    const std::vector<TokenId> ids = tokenizer.encode(text);
    EXPECT_EQ(show_ids(ids), show_ids(expected)) << "text " << n << ": '" << text << "'";
    EXPECT_EQ(tokenizer.decode(expected), text) << "text " << n;
    ++n;
  }
  EXPECT_EQ(n, 46u);
}

INSTANTIATE_TEST_SUITE_P(Files, SentencePieceGgufCorpus,
                         ::testing::Values("ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf"));

// llama.cpp's SPM rules: BOS when asked; the dummy prefix at the start and after every special
// token split out; decoding drops only the leading dummy space.
TEST(SentencePieceTokenizer, SpecialTokensAndDummyPrefix) {
  const fs::path gguf = kVocabDir / "ggml-vocab-llama-spm.gguf";
  if (!fs::exists(gguf)) GTEST_SKIP() << "test data absent: " << gguf;
  const Tokenizer tokenizer = gguf_tokenizer(gguf);
  EXPECT_EQ(show_ids(tokenizer.encode("Hello", {.add_special = true})), " 1 15043");
  EXPECT_EQ(show_ids(tokenizer.encode("", {.add_special = true})), " 1");
  EXPECT_EQ(show_ids(tokenizer.encode("<s>Hello</s>Hello", {.parse_special = true})),
            " 1 15043 2 15043");
  // Not parsed: the markup is plain text, spelled by ordinary pieces.
  EXPECT_EQ(show_ids(tokenizer.encode("<s>")), " 529 29879 29958");
  const std::vector<TokenId> ids = {1, 15043, 3186};
  EXPECT_EQ(tokenizer.decode(ids, {.skip_special = true}), "Hello world");
  EXPECT_EQ(tokenizer.decode(ids), "<s> Hello world");
}

// A tokenizer.json next to its config; a .xz copy is unpacked into a temporary folder first.
fs::path hf_tokenizer_dir(const std::string& family) {
  const fs::path dir = kTokenizersDir / family;
  if (fs::exists(dir / "tokenizer.json")) return dir;
  if (!fs::exists(dir / "tokenizer.json.xz")) return {};
  const fs::path temp =
      fs::temp_directory_path() / ("sluice_spm_test_" + family + "_" + std::to_string(::getpid()));
  fs::create_directories(temp);
  if (fs::exists(dir / "tokenizer_config.json"))
    fs::copy_file(dir / "tokenizer_config.json", temp / "tokenizer_config.json",
                  fs::copy_options::overwrite_existing);
  const std::string command = "xz -dc '" + (dir / "tokenizer.json.xz").string() + "' > '" +
                              (temp / "tokenizer.json").string() + "' 2>/dev/null";
  if (std::system(command.c_str()) != 0) return {};
  return temp;
}

struct HfCase {
  std::string text;
  std::vector<TokenId> ids;
};

// Expected ids: Hugging Face `tokenizers` 0.23.3, Tokenizer.from_file(tokenizer.json) with
// encode_special_tokens=True, encode(text, add_special_tokens=False).
void check_hf_family(const std::string& family, const std::vector<HfCase>& cases) {
  const fs::path dir = hf_tokenizer_dir(family);
  if (dir.empty()) GTEST_SKIP() << "test data absent (or no xz tool): " << kTokenizersDir / family;
  const Tokenizer tokenizer(load_hf_tokenizer_spec(dir.string()));
  if (dir.string().find("sluice_spm_test_") != std::string::npos) fs::remove_all(dir);
  ASSERT_EQ(tokenizer.spec().kind, TokenizerKind::SentencePiece);
  for (const HfCase& c : cases) {
    EXPECT_EQ(show_ids(tokenizer.encode(c.text)), show_ids(c.ids))
        << family << ": '" << c.text << "'";
    EXPECT_EQ(tokenizer.decode(c.ids), c.text) << family;
  }
}

TEST(SentencePieceTokenizer, Llama2TokenizerJson) {
  check_hf_family(
      "llama2",
      {
          {"Hello world, 你好 🌍", {15043, 3186, 29892, 29871, 30919, 31076, 29871, 31494}},
          {"  leading spaces", {259, 8236, 8162}},
          {"trailing   ", {25053, 1678}},
          {"tabs\tand\nnewlines\n\n\n", {18859, 12, 392, 13, 1482, 9012, 13, 13, 13}},
          {"    Hello\n    Hello", {268, 15043, 13, 1678, 15043}},
          {"naïve café Ω ß ﬁ",
           {1055, 30085, 345, 274, 28059, 29871, 30357, 29871, 30034, 29871, 31017}},
          {"3333333 3.14",
           {29871, 29941, 29941, 29941, 29941, 29941, 29941, 29941, 29871, 29941, 29889, 29896,
            29946}},
          {"I'm sure they'll've done it",
           {306, 29915, 29885, 1854, 896, 29915, 645, 29915, 345, 2309, 372}},
          {"<s>literal</s>", {529, 29879, 29958, 20889, 284, 829, 29879, 29958}},
          {"ﾊﾝ カタカナ", {29871, 242, 193, 141, 242, 193, 160, 29871, 30439, 30369, 30439, 30576}},
          {std::string(40, ' '), {462, 462, 3986}},
      });
}

TEST(SentencePieceTokenizer, Gemma3TokenizerJson) {
  check_hf_family(
      "gemma3",
      {
          {"Hello world, 你好 🌍", {9259, 1902, 236764, 43758, 237389, 236743, 244906}},
          {"  leading spaces", {138, 26016, 9952}},
          {"trailing   ", {136697, 139}},
          {"tabs\tand\nnewlines\n\n\n", {39218, 255968, 624, 107, 208697, 109}},
          {"    Hello\n    Hello", {140, 9259, 107, 140, 9259}},
          {"naïve café Ω ß ﬁ", {1789, 238527, 560, 33443, 76858, 114881, 97940}},
          {"def f(x):\n    return x*2\n",
           {2063, 517, 236769, 236781, 1473, 107, 140, 2060, 1123, 236829, 236778, 107}},
          {"<s>literal</s> <start_of_turn>",
           {203, 82951, 212, 655, 3041, 236779, 1340, 236779, 887, 236813}},
          {"ﾊﾝｶｸ カタカナ ひらがな 漢字",
           {243980, 242282, 244317, 243468, 19799, 237312, 123729, 121626, 155159, 237050, 236743,
            201637}},
          {"العربية עברית हिन्दी ไทย", {56734, 175899, 11173, 104154, 237270, 85394, 127604}},
          {std::string(40, ' '), {167, 145}},
      });
}

}  // namespace
}  // namespace sluice::text
