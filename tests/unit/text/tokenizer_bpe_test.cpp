// Byte-level BPE and the shared Tokenizer machinery on small hand-made vocabularies: the GPT-2
// byte mapping, UTF-8 repair, the pre-tokenizer table and split semantics, merges by rank,
// ignore_merges, special-token splitting (parse_special, lstrip/rstrip, longest first), BOS/EOS,
// decoding with skip_special and clean-up, spec validation and the streaming decoder.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "sluice/error.h"
#include "text/tokenizer/byte_level_bpe_bytes.h"
#include "text/tokenizer/pre_tokenizer.h"
#include "text/tokenizer/tokenizer.h"
#include "text/tokenizer/utf8.h"

namespace sluice::text {
namespace {

// The byte-level text of raw bytes.
std::string bl(std::string_view bytes) {
  std::string out;
  append_byte_level(out, bytes);
  return out;
}

// 256 single-byte tokens (id = byte value), then merged tokens, then specials:
//   256 "he", 257 "ll", 258 "hell", 259 "hello", 260 " w"(Ġw), 261 " wo", 262 "or", 263 " world"
//   264 <|s|> (control), 265 <|e|> (control), 266 <add> (user-defined), 267 <|s|><|e|> (control)
TokenizerSpec tiny_spec() {
  TokenizerSpec spec;
  spec.kind = TokenizerKind::BytePairByteLevel;
  spec.pre_name = "gpt-2";
  for (int b = 0; b < 256; ++b) spec.tokens.push_back(bl(std::string(1, static_cast<char>(b))));
  for (const char* t : {"he", "ll", "hell", "hello", " w", " wo", "or", " world"}) {
    spec.tokens.push_back(bl(t));
  }
  spec.tokens.insert(spec.tokens.end(), {"<|s|>", "<|e|>", "<add>", "<|s|><|e|>"});
  spec.types.assign(spec.tokens.size(), TokenType::Normal);
  spec.types[264] = spec.types[265] = spec.types[267] = TokenType::Control;
  spec.types[266] = TokenType::UserDefined;
  // Ranks in this order; " world" is reachable only as a whole (ignore_merges): "o r" outranks
  // "Ġw o", so " world" merges to Ġw, or, l, d.
  spec.merges = {"h e", "l l", "he ll", "hell o", bl(" ") + " w", "o r", bl(" w") + " o"};
  spec.bos = 264;
  spec.eos = 265;
  spec.clean_spaces = false;
  return spec;
}

TEST(ByteLevelMapping, IsTheGpt2Bijection) {
  EXPECT_EQ(byte_to_codepoint('!'), U'!');
  EXPECT_EQ(byte_to_codepoint(' '), 0x120u);   // Ġ
  EXPECT_EQ(byte_to_codepoint('\n'), 0x10Au);  // Ċ
  EXPECT_EQ(byte_to_codepoint(0x00), 0x100u);
  EXPECT_EQ(byte_to_codepoint(0xAD), 0x143u);  // soft hyphen: the last remapped byte
  EXPECT_EQ(byte_to_codepoint(0xFF), 0xFFu);
  for (int b = 0; b < 256; ++b) {
    const auto back = codepoint_to_byte(byte_to_codepoint(static_cast<uint8_t>(b)));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, b);
  }
  EXPECT_FALSE(codepoint_to_byte(0x20).has_value());  // space itself is not a mapped char
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(byte_level_to_bytes(bl(all)), all);
  EXPECT_EQ(bl(" hi\n"), "\xC4\xA0hi\xC4\x8A");
}

TEST(Utf8, RepairsPerByteForInputAndPerSubpartForOutput) {
  const std::string truncated =
      "a\xE2\x82"
      "b";  // a cut-short euro sign
  EXPECT_FALSE(is_valid_utf8(truncated));
  EXPECT_EQ(repair_utf8_per_byte(truncated),
            "a\xEF\xBF\xBD\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(repair_utf8_lossy(truncated),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(repair_utf8_lossy("\xC0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong NUL
  EXPECT_EQ(repair_utf8_lossy("\xED\xA0\x80"),
            "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_TRUE(is_valid_utf8("\xF0\x9F\x8C\x8D \xE4\xBD\xA0"));
  EXPECT_EQ(utf8_complete_prefix("ab\xF0\x9F\x8C"), 2u);
  EXPECT_EQ(utf8_complete_prefix("ab\xF0\x9F\x8C\x8D"), 6u);
  EXPECT_EQ(utf8_complete_prefix("ab\xFF"), 3u);  // can never complete: not held back
}

TEST(PreTokenizerTable, EveryNameCompilesAndUnknownNamesAreRefused) {
  const std::vector<std::string> names = supported_pre_tokenizers();
  EXPECT_GE(names.size(), 80u);  // llama.cpp knew 86 accepted spellings when this was written
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const auto regexes = pre_tokenizer_regexes(name);
    ASSERT_TRUE(regexes.has_value());
    const PreTokenizer pre(*regexes);  // throws on a bad pattern
    const std::string sample = "Hello wörld's 1234567 ,. 你好 \xF0\x9F\x8C\x8D  \n\n x";
    std::string joined;
    for (const std::string& piece : pre.split(sample)) joined += piece;
    EXPECT_EQ(joined, sample);  // pieces tile the input
  }
  EXPECT_FALSE(pre_tokenizer_regexes("no-such-pre").has_value());
  for (const std::string& name : refused_pre_tokenizers()) {
    EXPECT_FALSE(pre_tokenizer_info(name).has_value()) << name;
  }
  try {
    require_pre_tokenizer("gemma4");
    FAIL() << "gemma4 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "unsupported pre-tokenizer 'gemma4'");
  }
  const PreTokenizerInfo llama3 = require_pre_tokenizer("llama-bpe");
  EXPECT_TRUE(llama3.ignore_merges);
  EXPECT_TRUE(llama3.add_bos);
  EXPECT_FALSE(require_pre_tokenizer("qwen2").clean_spaces);
  EXPECT_EQ(pre_tokenizer_regexes(""), pre_tokenizer_regexes("default"));
}

using Pieces = std::vector<std::string>;

TEST(PreTokenizer, KeepsMatchesAndGapsAndLooksAheadOnlyInsideThePiece) {
  const PreTokenizer gpt2(*pre_tokenizer_regexes("gpt-2"));
  EXPECT_EQ(gpt2.split("Hello   world!\n"), (Pieces{"Hello", "  ", " world", "!", "\n"}));
  EXPECT_EQ(gpt2.split("I'm 12ab"), (Pieces{"I", "'m", " 12", "ab"}));
  // Each regex splits the previous pieces: starcoder isolates digits first.
  const PreTokenizer starcoder(*pre_tokenizer_regexes("starcoder"));
  EXPECT_EQ(starcoder.split("a 12"), (Pieces{"a", " ", "1", "2"}));
  // Lookahead stops at the end of the piece: "\s+(?!\S)" takes both trailing spaces.
  EXPECT_EQ(gpt2.split("a  "), (Pieces{"a", "  "}));
  const PreTokenizer llama3(*pre_tokenizer_regexes("llama3"));
  EXPECT_EQ(llama3.split("1234567 HELLO'S\r\n\n  x"),
            (Pieces{"123", "456", "7", " HELLO", "'S", "\r\n\n", " ", " x"}));
  // Empty matches split too (superbpe's digit grouping from the right).
  const PreTokenizer superbpe(*pre_tokenizer_regexes("superbpe"));
  EXPECT_EQ(superbpe.split("1234567x"), (Pieces{"1", "234", "567", "x"}));
  const PreTokenizer afmoe(*pre_tokenizer_regexes("afmoe"));
  EXPECT_EQ(afmoe.split("1234567"), (Pieces{"1", "234", "567"}));
  // Unicode classes cover all of Unicode, not only what a hand table lists.
  EXPECT_EQ(gpt2.split("naïve Ωmega 𝔘x"), (Pieces{"naïve", " Ωmega", " 𝔘x"}));
  // Oniguruma's \s (used by Hugging Face) excludes U+180E; PCRE2's would include it.
  EXPECT_EQ(gpt2.split("a \xE1\xA0\x8E"
                       "b"),
            (Pieces{"a", " \xE1\xA0\x8E", "b"}));
}

// The digit-grouping patterns run through linear stand-ins (their lookaheads are quadratic);
// the same pattern behind a no-op "(?:)" runs through PCRE2 and must cut identically.
TEST(PreTokenizer, DigitGroupingFastPathsMatchTheRegexes) {
  const std::vector<std::string> patterns = {R"re(\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N})))re",
                                             R"re(\d{1,3}(?=(?:\d{3})*\b))re",
                                             R"re((?=(\d{3})+(?!\d)))re"};
  const std::vector<std::string> alphabet = {
      "1", "2", "0", "\xC2\xB2" /* ² (No) */, "\xD9\xA3" /* ٣ (Nd) */, "a", " ", "_", "."};
  std::mt19937 rng(11);
  for (const std::string& pattern : patterns) {
    SCOPED_TRACE(pattern);
    const PreTokenizer fast({pattern});
    const PreTokenizer slow({"(?:)" + pattern});
    for (int i = 0; i < 2000; ++i) {
      std::string text;
      for (int n = rng() % 16; n > 0; --n) text += alphabet[rng() % alphabet.size()];
      ASSERT_EQ(fast.split(text), slow.split(text)) << "text: '" << text << "'";
    }
  }
}

TEST(ByteLevelBpe, MergesByRankAndFallsBackToBytes) {
  const Tokenizer tok(tiny_spec());
  EXPECT_EQ(tok.encode("hello"), (std::vector<TokenId>{259}));
  EXPECT_EQ(tok.encode("hello world"), (std::vector<TokenId>{259, 260, 262, 'l', 'd'}));
  EXPECT_EQ(tok.encode("hel"), (std::vector<TokenId>{256, 'l'}));
  EXPECT_EQ(tok.decode(tok.encode("hello world")), "hello world");
  EXPECT_TRUE(tok.encode("").empty());
}

TEST(ByteLevelBpe, IgnoreMergesTakesWholePreTokensFromTheVocabulary) {
  TokenizerSpec spec = tiny_spec();
  EXPECT_EQ(Tokenizer(spec).encode(" world"), (std::vector<TokenId>{260, 262, 'l', 'd'}));
  spec.ignore_merges = true;
  EXPECT_EQ(Tokenizer(spec).encode(" world"), (std::vector<TokenId>{263}));
}

TEST(ByteLevelBpe, InvalidUtf8BecomesReplacementCharacters) {
  const Tokenizer tok(tiny_spec());
  // Each bad byte is one U+FFFD (EF BF BD), as llama.cpp does; nothing throws or crashes.
  const std::vector<TokenId> ids = tok.encode(
      "a\xE2\x82"
      "b\xFF");
  EXPECT_EQ(ids,
            (std::vector<TokenId>{'a', 0xEF, 0xBF, 0xBD, 0xEF, 0xBF, 0xBD, 'b', 0xEF, 0xBF, 0xBD}));
  EXPECT_EQ(tok.decode(ids),
            "a\xEF\xBF\xBD\xEF\xBF\xBD"
            "b\xEF\xBF\xBD");
}

TEST(ByteLevelBpe, ArbitraryBytesAndLongRunsRoundTripUnderEveryPreTokenizer) {
  std::mt19937 rng(7);
  std::vector<std::string> inputs = {std::string(60000, ' ') + "x", std::string(50000, '\n'),
                                     std::string(30000, '7'), std::string(40000, 'a')};
  for (int i = 0; i < 40; ++i) {
    std::string bytes(1 + rng() % 64, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() % 256);
    inputs.push_back(bytes);
  }
  for (const std::string& name : supported_pre_tokenizers()) {
    SCOPED_TRACE(name);
    TokenizerSpec spec = tiny_spec();
    spec.pre_name = name;
    const Tokenizer tok(spec);
    for (const std::string& input : inputs) {
      // Valid input comes back exactly; invalid bytes come back as U+FFFD.
      EXPECT_EQ(tok.decode(tok.encode(input)), repair_utf8_per_byte(input));
    }
  }
}

TEST(SpecialTokens, ControlOnlyWithParseSpecialUserDefinedAlways) {
  const Tokenizer tok(tiny_spec());
  const std::string text = "he<|s|>he<add>";
  EXPECT_EQ(tok.encode(text), tok.encode(text, {.parse_special = false}));
  std::vector<TokenId> plain = tok.encode("he<|s|>he");
  plain.push_back(266);
  EXPECT_EQ(tok.encode(text), plain);
  EXPECT_EQ(tok.encode(text, {.parse_special = true}), (std::vector<TokenId>{256, 264, 256, 266}));
  // Longest first: "<|s|><|e|>" is one token, not <|s|> then <|e|>.
  EXPECT_EQ(tok.encode("<|s|><|e|><|e|>", {.parse_special = true}),
            (std::vector<TokenId>{267, 265}));
}

TEST(SpecialTokens, LstripAndRstripSwallowAsciiSpace) {
  TokenizerSpec spec = tiny_spec();
  spec.lstrip_ids = {266};
  spec.rstrip_ids = {264};
  const Tokenizer tok(spec);
  EXPECT_EQ(tok.encode("he  <add>he"), (std::vector<TokenId>{256, 266, 256}));
  EXPECT_EQ(tok.encode("<|s|> \n he", {.parse_special = true}), (std::vector<TokenId>{264, 256}));
}

TEST(SpecialTokens, BosAndEosFollowTheSpec) {
  TokenizerSpec spec = tiny_spec();
  spec.add_bos = true;
  spec.add_eos = true;
  const Tokenizer tok(spec);
  EXPECT_EQ(tok.encode("he"), (std::vector<TokenId>{256}));
  EXPECT_EQ(tok.encode("he", {.add_special = true}), (std::vector<TokenId>{264, 256, 265}));
  EXPECT_EQ(tok.encode("", {.add_special = true}), (std::vector<TokenId>{264, 265}));
}

TEST(Decode, SkipSpecialDropsControlTokensAndCleanUpFollowsLlamaCpp) {
  TokenizerSpec spec = tiny_spec();
  const std::vector<TokenId> ids = {264, 259, 266, 265};
  EXPECT_EQ(Tokenizer(spec).decode(ids), "<|s|>hello<add><|e|>");
  EXPECT_EQ(Tokenizer(spec).decode(ids, {.skip_special = true}), "hello<add>");
  EXPECT_EQ(Tokenizer(spec).token_piece(264, {.skip_special = true}), "");
  spec.clean_spaces = true;
  const Tokenizer clean(spec);
  const auto bytes = [](std::string_view s) {
    std::vector<TokenId> out;
    for (const char c : s) out.push_back(static_cast<uint8_t>(c));
    return out;
  };
  EXPECT_EQ(clean.decode(bytes("a , b . it 's ' x don 't")), "a, b. it's'x don 't");
  EXPECT_THROW(clean.decode(std::vector<TokenId>{9999}), Error);
  EXPECT_TRUE(clean.is_end_of_generation(265));
  EXPECT_FALSE(clean.is_end_of_generation(264));
  EXPECT_TRUE(clean.is_control(264));
  EXPECT_FALSE(clean.is_control(266));
}

TEST(Validation, RefusesInconsistentSpecs) {
  auto refused = [](TokenizerSpec spec, const std::string& expected) {
    try {
      Tokenizer tok(std::move(spec));
      ADD_FAILURE() << "accepted; expected: " << expected;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  TokenizerSpec spec = tiny_spec();
  spec.bos = 5000;
  refused(spec, "bos id 5000 is out of range");
  spec = tiny_spec();
  spec.types.pop_back();
  refused(spec, "token types for");
  spec = tiny_spec();
  spec.eos.reset();
  spec.add_eos = true;
  refused(spec, "add_eos is set but there is no eos token");
  spec = tiny_spec();
  spec.tokens[259] = spec.tokens[0];
  refused(spec, "duplicate token");
  spec = tiny_spec();
  spec.pre_name = "no-such-pre";
  refused(spec, "unsupported pre-tokenizer 'no-such-pre'");
  refused(TokenizerSpec{}, "vocabulary is empty");
}

TEST(StreamingDecoder, NeverEmitsPartialUtf8) {
  const Tokenizer tok(tiny_spec());
  StreamingDecoder stream(tok);
  // "é🌍" as single-byte tokens: nothing comes out until each character is complete.
  const std::string text = "\xC3\xA9\xF0\x9F\x8C\x8D!";
  std::vector<std::string> outs;
  for (const char c : text) outs.push_back(stream.push(static_cast<uint8_t>(c)));
  EXPECT_EQ(outs, (std::vector<std::string>{"", "\xC3\xA9", "", "", "", "\xF0\x9F\x8C\x8D", "!"}));
  EXPECT_EQ(stream.flush(), "");
  // A sequence cut short is replaced at flush; a byte that can never complete at once.
  EXPECT_EQ(stream.push(0xF0), "");
  EXPECT_EQ(stream.push(0x9F), "");
  EXPECT_EQ(stream.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(stream.push(0xFF), "\xEF\xBF\xBD");
  EXPECT_EQ(stream.push(0xC3), "");
  EXPECT_EQ(stream.push('a'),
            "\xEF\xBF\xBD"
            "a");
  StreamingDecoder skipping(tok, {.skip_special = true});
  EXPECT_EQ(skipping.push(264), "");
  EXPECT_EQ(skipping.push(259), "hello");
}

}  // namespace
}  // namespace sluice::text
