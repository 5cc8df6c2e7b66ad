// The GGUF tokenizer adapter: llama.cpp's per-model defaults, the pre-tokenizer table, explicit
// keys winning over defaults, the name-based end-of-generation set, and refusals naming the key.
// Metadata is built in memory; the real vocab GGUFs are covered when test data is present.
#include <gtest/gtest.h>

#include <filesystem>

#include "format/model_file.h"
#include "runtime/tokenizer_from_model_file.h"
#include "sluice/error.h"

namespace sluice {
namespace {

using text::TokenizerKind;
using text::TokenType;

ModelFile vocab_file(const std::string& model, std::vector<std::string> tokens) {
  ModelFile file(FileFormat::gguf, "test.gguf");
  file.add_metadata("tokenizer.ggml.model", MetaValue::string(model));
  file.add_metadata("tokenizer.ggml.tokens", MetaValue::string_array(std::move(tokens)));
  return file;
}

TEST(TokenizerFromGguf, SentencePieceDefaultsFollowLlamaCpp) {
  ModelFile file = vocab_file("llama", {"<unk>", "<s>", "</s>", "\xE2\x96\x81hi"});
  const auto spec = tokenizer_spec_from_gguf(file);
  EXPECT_EQ(spec.kind, TokenizerKind::SentencePiece);
  EXPECT_EQ(spec.bos, 1);
  EXPECT_EQ(spec.eos, 2);
  EXPECT_EQ(spec.unk, 0);
  EXPECT_TRUE(spec.add_bos);
  EXPECT_FALSE(spec.add_eos);
  EXPECT_TRUE(spec.add_space_prefix);
  EXPECT_EQ(spec.eog, (std::vector<text::TokenId>{2}));  // eos, and </s> by name
}

TEST(TokenizerFromGguf, BytePairTakesPreTokenizerFlagsAndExplicitKeys) {
  ModelFile file = vocab_file("gpt2", {"a", "b", "ab", "<|begin_of_text|>", "<|eot_id|>"});
  file.add_metadata("tokenizer.ggml.pre", MetaValue::string("llama-bpe"));
  file.add_metadata("tokenizer.ggml.merges", MetaValue::string_array({"a b"}));
  file.add_metadata("tokenizer.ggml.bos_token_id", MetaValue::scalar<uint32_t>(3));
  file.add_metadata("tokenizer.ggml.eos_token_id", MetaValue::scalar<uint32_t>(4));
  file.add_metadata("tokenizer.ggml.token_type",
                    MetaValue::array<int32_t>({1, 1, 1, 3, 1}));  // <|eot_id|> not control
  const auto spec = tokenizer_spec_from_gguf(file);
  EXPECT_EQ(spec.kind, TokenizerKind::BytePairByteLevel);
  EXPECT_FALSE(spec.pre_regexes.empty());
  EXPECT_TRUE(spec.ignore_merges);
  EXPECT_TRUE(spec.add_bos);  // llama-bpe implies it
  EXPECT_EQ(spec.bos, 3);
  EXPECT_EQ(spec.eot, 4);
  EXPECT_EQ(spec.types[4], TokenType::Control);  // llama.cpp's override for an EOG name
  EXPECT_EQ(spec.merges, (std::vector<std::string>{"a b"}));
}

TEST(TokenizerFromGguf, HarmonyEndIsNotEndOfGeneration) {
  ModelFile file = vocab_file("gpt2", {"x", "<|return|>", "<|call|>", "<|end|>", "<|channel|>"});
  file.add_metadata("tokenizer.ggml.pre", MetaValue::string("gpt-4o"));
  file.add_metadata("tokenizer.ggml.merges", MetaValue::string_array({}));
  file.add_metadata("tokenizer.ggml.eos_token_id", MetaValue::scalar<uint32_t>(1));
  const auto spec = tokenizer_spec_from_gguf(file);
  EXPECT_EQ(spec.eog, (std::vector<text::TokenId>{1, 2}));
  EXPECT_EQ(spec.types[3], TokenType::UserDefined);
  EXPECT_EQ(spec.types[4], TokenType::UserDefined);
}

TEST(TokenizerFromGguf, RefusesWithTheKeyNamed) {
  auto message = [](const ModelFile& file) {
    try {
      tokenizer_spec_from_gguf(file);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(vocab_file("plamo9", {"a"})).find("unknown tokenizer model 'plamo9'"),
            std::string::npos);
  EXPECT_NE(message(vocab_file("gpt2", {"a"})).find("tokenizer.ggml.merges"), std::string::npos);
  ModelFile unknown_pre = vocab_file("gpt2", {"a"});
  unknown_pre.add_metadata("tokenizer.ggml.pre", MetaValue::string("no-such-pre"));
  unknown_pre.add_metadata("tokenizer.ggml.merges", MetaValue::string_array({}));
  EXPECT_NE(message(unknown_pre).find("no-such-pre"), std::string::npos);
  EXPECT_NE(message(vocab_file("llama", {"a", "a"})).find("duplicate token"), std::string::npos);
  ModelFile no_bos = vocab_file("t5", {"<pad>", "</s>", "<unk>"});
  no_bos.add_metadata("tokenizer.ggml.add_bos_token", MetaValue::scalar<bool>(true));
  EXPECT_NE(message(no_bos).find("bos_token_id is not set"), std::string::npos);
  ModelFile empty(FileFormat::gguf, "empty.gguf");
  EXPECT_NE(message(empty).find("no tokenizer"), std::string::npos);
}

TEST(TokenizerFromGguf, VocabFilesFromLlamaCpp) {
  const std::filesystem::path dir = std::filesystem::path(SLUICE_TESTDATA_DIR) / "vocab";
  if (!std::filesystem::exists(dir / "ggml-vocab-gpt-2.gguf")) GTEST_SKIP() << "no " << dir;
  const auto gpt2 = tokenizer_spec_from_model_path((dir / "ggml-vocab-gpt-2.gguf").string());
  EXPECT_EQ(gpt2.tokens.size(), 50257u);
  EXPECT_EQ(gpt2.bos, 50256);
  EXPECT_FALSE(gpt2.add_bos);
  const auto neox = tokenizer_spec_from_model_path((dir / "ggml-vocab-gpt-neox.gguf").string());
  EXPECT_FALSE(neox.pre_regexes.empty());  // no tokenizer.ggml.pre: llama.cpp's default set
  const auto bert = tokenizer_spec_from_model_path((dir / "ggml-vocab-bert-bge.gguf").string());
  EXPECT_EQ(bert.kind, TokenizerKind::WordPiece);
  EXPECT_EQ(bert.sep, 102);
}

}  // namespace
}  // namespace sluice
