// SentencePiece segmentation against its references: llama.cpp's own tokenizer corpus (the
// .inp/.out pairs of every "llama"-model vocab GGUF in testdata/vocab, ids made by Hugging Face)
// and Hugging Face tokenizer.json files (llama2, gemma3) in testdata/tokenizers. Drives the
// SegmentModel directly, one fragment per text, as llama.cpp does with parse_special off.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/gguf/gguf_reader.h"
#include "format/model_file.h"
#include "sluice/error.h"
#include "text/tokenizer/segment_model.h"
#include "unit/text/vocab_cases.h"

namespace sluice::text {
namespace {

namespace fs = std::filesystem;

const fs::path kVocabDir = fs::path(SLUICE_TESTDATA_DIR) / "vocab";
const fs::path kTokenizersDir = fs::path(SLUICE_TESTDATA_DIR) / "tokenizers";

using test_support::read_binary_file;
using test_support::read_vocab_cases;
using test_support::show_ids;
using test_support::VocabCase;

// The tokenizer.ggml.* keys a SentencePiece vocabulary uses, with llama.cpp's defaults for the
// "llama" model (add_space_prefix on unless the file says otherwise).
TokenizerSpec spec_from_vocab_gguf(const fs::path& path) {
  const ModelFile file = read_gguf(path.string());
  TokenizerSpec spec;
  spec.kind = TokenizerKind::SentencePiece;
  spec.tokens = *file.get_array("tokenizer.ggml.tokens").strings();
  if (file.contains("tokenizer.ggml.scores"))
    spec.scores = file.get_array("tokenizer.ggml.scores").array_as<float>().value();
  const std::vector<int32_t> types =
      file.get_array("tokenizer.ggml.token_type").array_as<int32_t>().value();
  for (int32_t type : types) spec.types.push_back(static_cast<TokenType>(type));
  auto id = [&](const char* key) -> std::optional<TokenId> {
    if (!file.contains(key)) return std::nullopt;
    return static_cast<TokenId>(file.get_u32(key));
  };
  spec.bos = id("tokenizer.ggml.bos_token_id");
  spec.eos = id("tokenizer.ggml.eos_token_id");
  spec.unk = id("tokenizer.ggml.unknown_token_id");
  spec.add_space_prefix = file.contains("tokenizer.ggml.add_space_prefix")
                              ? file.get_bool("tokenizer.ggml.add_space_prefix")
                              : true;
  return spec;
}

std::vector<TokenId> encode(const SegmentModel& model, const std::string& text) {
  std::vector<TokenId> ids;
  model.encode_fragment(text, FragmentContext{.at_text_start = true}, ids);
  return ids;
}

std::string decode(const SegmentModel& model, const std::vector<TokenId>& ids) {
  std::string text;
  for (TokenId id : ids) text += model.token_to_bytes(id);
  model.finish_decode(text, true);
  return text;
}

class SentencePieceVocab : public ::testing::TestWithParam<const char*> {};

TEST_P(SentencePieceVocab, MatchesLlamaCppCorpus) {
  const fs::path gguf = kVocabDir / GetParam();
  const fs::path inp = kVocabDir / (std::string(GetParam()) + ".inp");
  const fs::path out = kVocabDir / (std::string(GetParam()) + ".out");
  if (!fs::exists(gguf) || !fs::exists(inp) || !fs::exists(out))
    GTEST_SKIP() << "test data absent: " << gguf << " (+ .inp/.out)";
  const auto model = make_sentencepiece(spec_from_vocab_gguf(gguf));
  const std::vector<VocabCase> cases = read_vocab_cases(inp, out);
  ASSERT_EQ(cases.size(), 46u);
  for (const VocabCase& c : cases) {
    const std::vector<TokenId> ids = encode(*model, c.text);
    EXPECT_EQ(show_ids(ids), show_ids(c.ids)) << "text: '" << c.text << "'";
    // Byte fallback makes every text representable, and the dummy prefix is the only space
    // decoding drops, so each text comes back exactly.
    EXPECT_EQ(decode(*model, c.ids), c.text);
  }
}

INSTANTIATE_TEST_SUITE_P(Files, SentencePieceVocab,
                         ::testing::Values("ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf"));

TEST(SentencePiece, DummyPrefixOnlyAtStartAndAfterSpecial) {
  const fs::path gguf = kVocabDir / "ggml-vocab-llama-spm.gguf";
  if (!fs::exists(gguf)) GTEST_SKIP() << "test data absent: " << gguf;
  const auto model = make_sentencepiece(spec_from_vocab_gguf(gguf));
  std::vector<TokenId> start, middle, after_special;
  model->encode_fragment("Hello", {.at_text_start = true}, start);
  model->encode_fragment("Hello", {}, middle);
  model->encode_fragment("Hello", {.after_special = true}, after_special);
  EXPECT_EQ(show_ids(start), " 15043");   // ▁Hello
  EXPECT_EQ(show_ids(middle), " 10994");  // Hello
  EXPECT_EQ(show_ids(after_special), " 15043");
  std::vector<TokenId> empty;
  model->encode_fragment("", {.at_text_start = true}, empty);
  EXPECT_TRUE(empty.empty());
  std::string text = " Hello";
  model->finish_decode(text, false);
  EXPECT_EQ(text, " Hello");  // only the dummy prefix at the very start is dropped
}

TEST(SentencePiece, PiecesDecodeToBytes) {
  const fs::path gguf = kVocabDir / "ggml-vocab-llama-spm.gguf";
  if (!fs::exists(gguf)) GTEST_SKIP() << "test data absent: " << gguf;
  const auto model = make_sentencepiece(spec_from_vocab_gguf(gguf));
  EXPECT_EQ(model->token_to_bytes(15043), " Hello");
  EXPECT_EQ(model->token_to_bytes(3 + 0xF0), "\xF0");  // <0xF0>
  EXPECT_EQ(model->token_to_bytes(1), "<s>");
  EXPECT_THROW(model->token_to_bytes(32000), sluice::Error);
}

// --- Hugging Face tokenizer.json (ranked merges instead of scores) ---------------------------

// The parts of a SentencePiece-style BPE tokenizer.json the segmenter needs. Added tokens are
// typed as Hugging Face flags them; splitting them out of text is Tokenizer's job, so the
// texts below contain none.
TokenizerSpec spec_from_tokenizer_json(const std::string& json_text) {
  const nlohmann::json json = nlohmann::json::parse(json_text);
  const nlohmann::json& model = json.at("model");
  TokenizerSpec spec;
  spec.kind = TokenizerKind::SentencePiece;
  for (const auto& [piece, id] : model.at("vocab").items()) {
    const size_t index = id.get<size_t>();
    if (spec.tokens.size() <= index) spec.tokens.resize(index + 1);
    spec.tokens[index] = piece;
  }
  spec.types.assign(spec.tokens.size(), TokenType::Normal);
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    const std::string& piece = spec.tokens[id];
    if (piece.size() == 6 && piece.starts_with("<0x") && piece.ends_with(">"))
      spec.types[id] = TokenType::Byte;
  }
  for (const auto& added : json.at("added_tokens")) {
    const size_t id = added.at("id").get<size_t>();
    if (id >= spec.tokens.size()) continue;
    spec.types[id] = added.at("special").get<bool>() ? TokenType::Control : TokenType::UserDefined;
  }
  for (const auto& merge : model.at("merges")) {
    spec.merges.push_back(merge.is_string()
                              ? merge.get<std::string>()
                              : merge[0].get<std::string>() + " " + merge[1].get<std::string>());
  }
  if (model.contains("unk_token") && model["unk_token"].is_string())
    spec.unk =
        static_cast<TokenId>(model["vocab"].at(model["unk_token"].get<std::string>()).get<int>());
  const std::string normalizer = json.at("normalizer").dump();
  spec.add_space_prefix = normalizer.find("\"Prepend\"") != std::string::npos;
  return spec;
}

// Reads a tokenizer.json, unpacking a .xz copy with the xz tool when only that is stored.
std::string read_tokenizer_json(const std::string& family) {
  const fs::path plain = kTokenizersDir / family / "tokenizer.json";
  if (fs::exists(plain)) return read_binary_file(plain);
  const fs::path packed = kTokenizersDir / family / "tokenizer.json.xz";
  if (!fs::exists(packed)) return {};
  std::string text;
  if (FILE* pipe = ::popen(("xz -dc '" + packed.string() + "' 2>/dev/null").c_str(), "r")) {
    char buffer[1 << 16];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) text.append(buffer, n);
    ::pclose(pipe);
  }
  return text;
}

struct HfCase {
  std::string text;
  std::vector<TokenId> ids;
};

// Expected ids from the Hugging Face `tokenizers` package (0.23), encode(text,
// add_special_tokens=False).
void check_hf_family(const std::string& family, const std::vector<HfCase>& cases) {
  const std::string json = read_tokenizer_json(family);
  if (json.empty()) GTEST_SKIP() << "test data absent (or xz missing): " << kTokenizersDir / family;
  const auto model = make_sentencepiece(spec_from_tokenizer_json(json));
  for (const HfCase& c : cases) {
    EXPECT_EQ(show_ids(encode(*model, c.text)), show_ids(c.ids))
        << family << " text: '" << c.text << "'";
    EXPECT_EQ(decode(*model, c.ids), c.text) << family;
  }
}

TEST(SentencePieceHf, Llama2) {
  check_hf_family("llama2", {
                                {"Hello world, 你好 🌍",
                                 {15043, 3186, 29892, 29871, 30919, 31076, 29871, 31494}},
                            });
}

TEST(SentencePieceHf, Gemma3) {
  check_hf_family("gemma3",
                  {
                      {"Hello world, 你好 🌍", {9259, 1902, 236764, 43758, 237389, 236743, 244906}},
                  });
}

}  // namespace
}  // namespace sluice::text
