// The Hugging Face tokenizer.json adapter on small inline documents: which pipeline maps to
// which kind and regexes, Unicode normalizers, merges in both spellings, added-token types,
// TemplateProcessing BOS, config ids, and refusals that name the stage that cannot be mapped.
#include <gtest/gtest.h>

#include <string>

#include "sluice/error.h"
#include "text/tokenizer/hf_tokenizer_json.h"

namespace sluice::text {
namespace {

std::string document(const std::string& pre_tokenizer, const std::string& model_extra = "",
                     const std::string& normalizer = "null", const std::string& post = "null") {
  return R"({"normalizer": )" + normalizer + R"(, "pre_tokenizer": )" + pre_tokenizer +
         R"(, "post_processor": )" + post +
         R"(, "added_tokens": [{"id": 4, "content": "<|end|>", "special": true},
                               {"id": 5, "content": "<think>", "special": false}],
         "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "<0x41>": 3}, "merges": [["a", "b"]])" +
         model_extra + "}}";
}

std::string error_of(const std::string& json) {
  try {
    hf_tokenizer_spec_from_json(json, "", "", "test.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(HfTokenizerJson, ByteLevelSequenceMapsSplitsInOrder) {
  const auto spec = hf_tokenizer_spec_from_json(
      document(R"({"type": "Sequence", "pretokenizers": [
          {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": false},
          {"type": "Digits", "individual_digits": true},
          {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]})",
               R"(, "ignore_merges": true)"),
      R"({"eos_token": {"content": "<|end|>"}, "chat_template": "{{ x }}"})", "", "test.json");
  EXPECT_EQ(spec.kind, TokenizerKind::BytePairByteLevel);
  EXPECT_EQ(spec.pre_regexes, (std::vector<std::string>{"\\p{N}{1,3}", "\\p{N}"}));
  EXPECT_EQ(spec.merges, (std::vector<std::string>{"a b"}));
  EXPECT_TRUE(spec.ignore_merges);
  EXPECT_EQ(spec.tokens.size(), 6u);
  EXPECT_EQ(spec.types[4], TokenType::Control);
  EXPECT_EQ(spec.types[5], TokenType::UserDefined);
  EXPECT_EQ(spec.eos, 4);
  EXPECT_EQ(spec.eog, (std::vector<TokenId>{4}));
  EXPECT_EQ(spec.chat_template, "{{ x }}");
  EXPECT_FALSE(spec.add_bos);
}

TEST(HfTokenizerJson, ByteLevelWithRegexUsesGpt2Pattern) {
  const auto spec = hf_tokenizer_spec_from_json(
      document(R"({"type": "ByteLevel", "add_prefix_space": false})"), "", "", "test.json");
  ASSERT_EQ(spec.pre_regexes.size(), 1u);
  EXPECT_EQ(spec.pre_regexes[0].substr(0, 12), "'s|'t|'re|'v");
}

TEST(HfTokenizerJson, SentencePieceStyleWithTemplateBos) {
  const auto spec = hf_tokenizer_spec_from_json(
      document("null", R"(, "byte_fallback": true, "unk_token": "a")",
               R"({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                  {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]})",
               R"({"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|end|>"}},
                  {"Sequence": {"id": "A"}}], "special_tokens": {"<|end|>": {"ids": [4]}}})"),
      "", "", "test.json");
  EXPECT_EQ(spec.kind, TokenizerKind::SentencePiece);
  EXPECT_TRUE(spec.add_space_prefix);
  EXPECT_TRUE(spec.scores.empty());  // merges by rank, as tokenizers does
  EXPECT_EQ(spec.types[3], TokenType::Byte);
  EXPECT_EQ(spec.types[0], TokenType::Unknown);
  EXPECT_TRUE(spec.add_bos);
  EXPECT_EQ(spec.bos, 4);
}

TEST(HfTokenizerJson, StringMergesAndHoles) {
  std::string json = document(R"({"type": "ByteLevel", "use_regex": false})");
  json.replace(json.find(R"([["a", "b"]])"), 12, R"(["a b"])");
  json.replace(json.find(R"("id": 5)"), 7, R"("id": 9)");
  const auto spec = hf_tokenizer_spec_from_json(json, "", "", "test.json");
  EXPECT_EQ(spec.merges, (std::vector<std::string>{"a b"}));
  ASSERT_EQ(spec.tokens.size(), 10u);
  EXPECT_EQ(spec.types[6], TokenType::Unused);
  EXPECT_EQ(spec.tokens[9], "<think>");
}

TEST(HfTokenizerJson, UnicodeNormalizersMapAloneOrInASequence) {
  const std::string byte_level = R"({"type": "ByteLevel", "add_prefix_space": false})";
  EXPECT_EQ(hf_tokenizer_spec_from_json(document(byte_level), "", "", "t").normalization,
            UnicodeNormalization::None);
  EXPECT_EQ(hf_tokenizer_spec_from_json(document(byte_level, "", R"({"type": "NFC"})"), "", "", "t")
                .normalization,
            UnicodeNormalization::NFC);
  EXPECT_EQ(
      hf_tokenizer_spec_from_json(
          document(byte_level, "", R"({"type": "Sequence", "normalizers": [{"type": "NFKD"}]})"),
          "", "", "t")
          .normalization,
      UnicodeNormalization::NFKD);
}

TEST(HfTokenizerJson, RefusesWhatItCannotMap) {
  EXPECT_NE(error_of(document(R"({"type": "Whitespace"})"))
                .find("unsupported pre_tokenizer 'Whitespace'"),
            std::string::npos);
  EXPECT_NE(
      error_of(document(R"({"type": "Split", "pattern": {"String": "x"}, "behavior": "Removed"})"))
          .find("behavior 'Removed'"),
      std::string::npos);
  EXPECT_NE(error_of(document(R"({"type": "ByteLevel"})", "", R"({"type": "Lowercase"})"))
                .find("unsupported normalizer 'Lowercase'"),
            std::string::npos);
  EXPECT_NE(error_of(document(R"({"type": "ByteLevel"})", "",
                              R"({"type": "Sequence", "normalizers": [{"type": "NFD"},
                                                                      {"type": "NFC"}]})"))
                .find("more than one Unicode normalization"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model": {"type": "Unigram", "vocab": []}})").find("'Unigram'"),
            std::string::npos);
  EXPECT_NE(error_of(document("null")).find("unsupported BPE pipeline"), std::string::npos);
  EXPECT_NE(error_of("{not json").find("not valid JSON"), std::string::npos);
}

}  // namespace
}  // namespace sluice::text
