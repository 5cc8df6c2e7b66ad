// Added tokens as Hugging Face tokenizers matches them (tokenizer.json sources): the
// leftmost-longest scan against llama.cpp's longest-token-first partition, lstrip/rstrip over
// Unicode whitespace, special spans consumed even when not matched, and llama2's legacy
// `normalized: true` specials, matched in the normalized text and decoded as their normalized
// form. Expected ids come from the tokenizers package (0.23) on the same documents.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "text/tokenizer/hf_tokenizer_json.h"
#include "text/tokenizer/special_token_splitter.h"
#include "text/tokenizer/tokenizer.h"

namespace sluice::text {
namespace {

// Fragments as "text" for plain text and "#id" for tokens, joined by '/'.
std::string show(std::string_view text, const std::vector<Fragment>& fragments) {
  std::string out;
  for (const Fragment& f : fragments) {
    if (!out.empty()) out += '/';
    out += f.token >= 0 ? "#" + std::to_string(f.token)
                        : std::string(text.substr(f.begin, f.end - f.begin));
  }
  return out;
}

// ids 0..3: "<|a|>" (control), "|a", "qq1", "1qqqq" (user-defined); 4: "<L>" (control, lstrip).
TokenizerSpec added_spec(AddedTokenMatch order) {
  TokenizerSpec spec;
  spec.tokens = {"<|a|>", "|a", "qq1", "1qqqq", "<L>", "x"};
  spec.types = {TokenType::Control,     TokenType::UserDefined, TokenType::UserDefined,
                TokenType::UserDefined, TokenType::Control,     TokenType::Normal};
  spec.lstrip_ids = {4};
  spec.added_token_match = order;
  return spec;
}

TEST(HfAddedTokens, OverlapsResolveLeftmostLongestLikeTokenizers) {
  const std::string text = "qq1qqqq";
  const TokenizerSpec hf = added_spec(AddedTokenMatch::LeftmostLongest);
  const TokenizerSpec cpp = added_spec(AddedTokenMatch::LongestTokenFirst);
  EXPECT_EQ(show(text, SpecialTokenSplitter(hf).split(text, true)), "#2/qqqq");
  EXPECT_EQ(show(text, SpecialTokenSplitter(cpp).split(text, true)), "qq/#3");
}

TEST(HfAddedTokens, UnmatchedSpecialSpanIsStillConsumed) {
  // tokenizers finds "<|a|>" and, with special tokens off, skips its whole span: the "|a"
  // inside is not looked for. llama.cpp's partition never sees the control token at all.
  const std::string text = "<|a|>|a";
  const TokenizerSpec hf = added_spec(AddedTokenMatch::LeftmostLongest);
  const TokenizerSpec cpp = added_spec(AddedTokenMatch::LongestTokenFirst);
  EXPECT_EQ(show(text, SpecialTokenSplitter(hf).split(text, false)), "<|a|>/#1");
  EXPECT_EQ(show(text, SpecialTokenSplitter(hf).split(text, true)), "#0/#1");
  EXPECT_EQ(show(text, SpecialTokenSplitter(cpp).split(text, false)), "</#1/|>/#1");
}

TEST(HfAddedTokens, LstripTakesUnicodeWhitespaceButNotAnEarlierToken) {
  const std::string text = "x\u3000 <L><L>";
  const TokenizerSpec hf = added_spec(AddedTokenMatch::LeftmostLongest);
  const TokenizerSpec cpp = added_spec(AddedTokenMatch::LongestTokenFirst);
  EXPECT_EQ(show(text, SpecialTokenSplitter(hf).split(text, true)), "x/#4/#4");
  EXPECT_EQ(show(text, SpecialTokenSplitter(cpp).split(text, true)), "x\u3000/#4/#4");
}

// llama2's "legacy" tokenizer.json in miniature: Prepend("▁") + Replace(" " → "▁"), and
// <unk>, <s>, </s> marked normalized.
const char* kLegacyJson = R"({"added_tokens": [
  {"id": 0, "content": "<unk>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": true},
  {"id": 1, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": true},
  {"id": 2, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": true}],
 "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
   {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
 "pre_tokenizer": null, "post_processor": null,
 "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
   "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "▁": 3, "a": 4, "b": 5, "<": 6, "s": 7, ">": 8, "▁a": 9, "▁b": 10},
   "merges": ["▁ a", "▁ b"]}})";

TEST(HfAddedTokens, LegacyNormalizedSpecialsHaveTheirNormalizedForm) {
  const TokenizerSpec spec = hf_tokenizer_spec_from_json(kLegacyJson, "", "", "legacy.json");
  EXPECT_EQ(spec.added_token_match, AddedTokenMatch::LeftmostLongest);
  ASSERT_EQ(spec.normalized_added.size(), 3u);
  EXPECT_EQ(spec.normalized_added[1].id, 1);
  EXPECT_EQ(spec.normalized_added[1].form, "\u2581<s>");
}

TEST(HfAddedTokens, LegacyNormalizedSpecialsMatchOnlyInNormalizedText) {
  const Tokenizer tok(hf_tokenizer_spec_from_json(kLegacyJson, "", "", "legacy.json"));
  const EncodeOptions special{.parse_special = true};
  using Ids = std::vector<TokenId>;
  EXPECT_EQ(tok.encode("<s>", special), (Ids{1}));
  EXPECT_EQ(tok.encode("a<s>b", special), (Ids{9, 6, 7, 8, 5}));
  EXPECT_EQ(tok.encode("a <s> b", special), (Ids{9, 1, 10}));
  EXPECT_EQ(tok.encode("<s><s>", special), (Ids{1, 6, 7, 8}));
  EXPECT_EQ(tok.encode(" <s>", special), (Ids{3, 1}));
  EXPECT_EQ(tok.encode("b</s>", special), (Ids{10, 6, 0, 7, 8}));
  EXPECT_EQ(tok.encode("b </s>", special), (Ids{10, 2}));
  EXPECT_EQ(tok.encode("a <s> b"), (Ids{9, 3, 6, 7, 8, 10}));
}

TEST(HfAddedTokens, LegacyNormalizedSpecialsDecodeAsTheirFormAndAreNeverSkipped) {
  const Tokenizer tok(hf_tokenizer_spec_from_json(kLegacyJson, "", "", "legacy.json"));
  const DecodeOptions skip{.skip_special = true};
  using Ids = std::vector<TokenId>;
  EXPECT_EQ(tok.decode(Ids{1, 9}), "<s> a");
  EXPECT_EQ(tok.decode(Ids{1, 9}, skip), "<s> a");
  EXPECT_EQ(tok.decode(Ids{9, 2}, skip), "a </s>");
  EXPECT_EQ(tok.decode(Ids{1, 1, 10}), "<s> <s> b");
  EXPECT_EQ(tok.token_piece(1, skip), " <s>");
}

TEST(HfAddedTokens, MetaspaceKeepsNormalizedTokensInTheRawTextMatch) {
  std::string json = kLegacyJson;
  json.replace(
      json.find(R"("pre_tokenizer": null)"), 21,
      R"("pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": false})");
  EXPECT_TRUE(hf_tokenizer_spec_from_json(json, "", "", "metaspace.json").normalized_added.empty());
}

TEST(HfAddedTokens, LstripAndRstripAreRead) {
  std::string json = kLegacyJson;
  json.replace(json.find(R"("lstrip": false)"), 15, R"("lstrip": true)");
  json.replace(json.find(R"("rstrip": false)", json.find("<s>")), 15, R"("rstrip": true)");
  const TokenizerSpec spec = hf_tokenizer_spec_from_json(json, "", "", "strip.json");
  EXPECT_EQ(spec.lstrip_ids, (std::vector<TokenId>{0}));
  EXPECT_EQ(spec.rstrip_ids, (std::vector<TokenId>{1}));
}

}  // namespace
}  // namespace sluice::text
