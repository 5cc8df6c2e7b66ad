// Unicode normalization of tokenizer input: the four forms on the cases that tell them apart
// (precomposed vs decomposed "é", Hangul syllables vs jamo, the "ﬁ" ligature), and through the
// Tokenizer: with NFC, decomposed text gets the ids of its composed form, as Hugging Face's
// NFC normalizer gives; without it, the bytes are tokenized as they are (llama.cpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "text/tokenizer/hf_tokenizer_json.h"
#include "text/tokenizer/tokenizer.h"
#include "text/tokenizer/unicode_normalization.h"

namespace sluice::text {
namespace {

using enum UnicodeNormalization;

const std::string kComposedE = "\xC3\xA9";                               // U+00E9
const std::string kDecomposedE = "e\xCC\x81";                            // U+0065 U+0301
const std::string kHangulHan = "\xED\x95\x9C";                           // U+D55C 한
const std::string kHangulJamo = "\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB";  // U+1112 U+1161 U+11AB
const std::string kLigatureFi = "\xEF\xAC\x81";                          // U+FB01

TEST(UnicodeNormalization, ComposesAndDecomposesAccents) {
  EXPECT_EQ(normalize_unicode(kDecomposedE, NFC), kComposedE);
  EXPECT_EQ(normalize_unicode(kComposedE, NFC), kComposedE);
  EXPECT_EQ(normalize_unicode(kComposedE, NFD), kDecomposedE);
  EXPECT_EQ(normalize_unicode(kDecomposedE, NFKC), kComposedE);
  EXPECT_EQ(normalize_unicode(kComposedE, NFKD), kDecomposedE);
  EXPECT_EQ(normalize_unicode("caf" + kDecomposedE + " ok", NFC), "caf" + kComposedE + " ok");
}

TEST(UnicodeNormalization, HangulSyllablesAndJamo) {
  EXPECT_EQ(normalize_unicode(kHangulJamo, NFC), kHangulHan);
  EXPECT_EQ(normalize_unicode(kHangulHan, NFD), kHangulJamo);
  EXPECT_EQ(normalize_unicode(kHangulJamo, NFKC), kHangulHan);
  EXPECT_EQ(normalize_unicode(kHangulHan, NFKD), kHangulJamo);
}

TEST(UnicodeNormalization, CompatibilityFormsOnlyFoldLigatures) {
  EXPECT_EQ(normalize_unicode(kLigatureFi, NFC), kLigatureFi);
  EXPECT_EQ(normalize_unicode(kLigatureFi, NFD), kLigatureFi);
  EXPECT_EQ(normalize_unicode(kLigatureFi, NFKC), "fi");
  EXPECT_EQ(normalize_unicode(kLigatureFi, NFKD), "fi");
}

TEST(UnicodeNormalization, NoneAndAsciiAreUntouched) {
  EXPECT_EQ(normalize_unicode(kDecomposedE, None), kDecomposedE);
  EXPECT_EQ(normalize_unicode("plain ascii", NFKC), "plain ascii");
  EXPECT_EQ(normalize_unicode("", NFC), "");
}

// A byte-level BPE whose vocabulary knows "é" whole and "e" + U+0301 only byte by byte (in
// GPT-2's byte→character mapping: C3 A9 is "Ã©", CC 81 is "Ìģ").
std::string byte_level_json(const std::string& normalizer) {
  return R"({"normalizer": )" + normalizer + R"(,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false},
    "added_tokens": [{"id": 6, "content": "<|end|>", "special": true}],
    "model": {"type": "BPE", "vocab": {"Ã": 0, "©": 1, "Ã©": 2, "e": 3, "Ì": 4, "ģ": 5},
              "merges": [["Ã", "©"]]}})";
}

TEST(UnicodeNormalization, TokenizerAppliesNfcToPlainTextBetweenSpecialTokens) {
  const Tokenizer nfc(
      hf_tokenizer_spec_from_json(byte_level_json(R"({"type": "NFC"})"), "", "", "test.json"));
  ASSERT_EQ(nfc.spec().normalization, NFC);
  EXPECT_EQ(nfc.encode(kDecomposedE), (std::vector<TokenId>{2}));
  EXPECT_EQ(nfc.encode(kComposedE), (std::vector<TokenId>{2}));
  const EncodeOptions special{.parse_special = true};
  EXPECT_EQ(nfc.encode(kDecomposedE + "<|end|>" + kDecomposedE, special),
            (std::vector<TokenId>{2, 6, 2}));

  const Tokenizer plain(hf_tokenizer_spec_from_json(byte_level_json("null"), "", "", "test.json"));
  EXPECT_EQ(plain.spec().normalization, None);
  EXPECT_EQ(plain.encode(kDecomposedE), (std::vector<TokenId>{3, 4, 5}));
}

}  // namespace
}  // namespace sluice::text
