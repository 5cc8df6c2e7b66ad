// WordPiece through the whole Tokenizer: llama.cpp's bert-bge vocab corpus (ids made by Hugging
// Face tokenizers, spec built by the production GGUF adapter) must match exactly and re-encode
// its own decoding; a small hand-made vocabulary pins the BERT rules one by one (accents,
// case, CJK, punctuation, controls, unknown words, decoding) without any test data.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "format/gguf/gguf_reader.h"
#include "runtime/tokenizer_from_model_file.h"
#include "text/tokenizer/tokenizer.h"
#include "unit/text/vocab_cases.h"

namespace sluice::text {
namespace {

namespace fs = std::filesystem;

const fs::path kBertGguf = fs::path(SLUICE_TESTDATA_DIR) / "vocab" / "ggml-vocab-bert-bge.gguf";

using test_support::read_vocab_cases;
using test_support::show_ids;
using test_support::VocabCase;

// llama.cpp's test-tokenizer-0 over bert-bge: add_special and parse_special off.
TEST(WordPieceCorpus, BertBgeMatchesHuggingFaceAndReencodesItsDecoding) {
  const std::string base = kBertGguf.string();
  if (!fs::exists(kBertGguf) || !fs::exists(base + ".inp") || !fs::exists(base + ".out"))
    GTEST_SKIP() << "test data absent: " << kBertGguf << " (+ .inp/.out)";
  const Tokenizer tokenizer(tokenizer_spec_from_gguf(read_gguf(base)));
  ASSERT_EQ(tokenizer.spec().kind, TokenizerKind::WordPiece);
  const TokenId unk = *tokenizer.spec().unk;

  const std::vector<VocabCase> cases = read_vocab_cases(base + ".inp", base + ".out");
  size_t n = 0, matched = 0;
  for (const auto& [text, expected] : cases) {
    const std::vector<TokenId> ids = tokenizer.encode(text);
    if (ids == expected) ++matched;
    EXPECT_EQ(show_ids(ids), show_ids(expected)) << "text " << n << ": '" << text << "'";
    // BERT's normalization loses case, accents and spacing, so the text cannot come back; what
    // must hold is that the decoded text (normalized, space-separated) encodes to the same ids.
    // An unknown token decodes to "[UNK]", which would encode as three pieces.
    if (std::find(expected.begin(), expected.end(), unk) == expected.end()) {
      const std::string decoded = tokenizer.decode(expected);
      EXPECT_EQ(show_ids(tokenizer.encode(decoded)), show_ids(expected))
          << "text " << n << " decoded as '" << decoded << "'";
    }
    ++n;
  }
  EXPECT_EQ(n, 46u);
  EXPECT_EQ(matched, n);

  // llama.cpp's detokenize: every word keeps the space its "▁" stands for, the first included;
  // continuation pieces join on; clean-up takes the space before punctuation.
  EXPECT_EQ(tokenizer.decode(tokenizer.encode("Hello, world!")), " hello, world!");
  EXPECT_EQ(tokenizer.decode(tokenizer.encode("Führer")), " fuhrer");
  EXPECT_EQ(tokenizer.decode(tokenizer.encode(" discards")), " discards");
  // [CLS] with add_special; control tokens only split out with parse_special.
  EXPECT_EQ(show_ids(tokenizer.encode("hello", {.add_special = true})), " 101 7592");
  EXPECT_EQ(show_ids(tokenizer.encode("[SEP] hello", {.parse_special = true})), " 102 7592");
  EXPECT_EQ(show_ids(tokenizer.encode("[SEP]")), " 1031 19802 1033");
}

// A vocabulary in llama.cpp's GGUF form: "▁" starts a word, continuation pieces are bare.
TokenizerSpec tiny_spec() {
  TokenizerSpec spec;
  spec.kind = TokenizerKind::WordPiece;
  spec.tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "▁hello", "▁world", "▁un",    "aff",  "able",
                 "▁,",    "▁!",    "▁$",    "▁«",    "▁»",     "▁cafe",  "▁naive", "▁中",  "▁文",
                 "▁σ",    "▁i",    "▁a",    "a",     "▁?",     "▁'",     "▁s",     "▁hel", "lo"};
  spec.types.assign(spec.tokens.size(), TokenType::Normal);
  for (TokenId id : {0, 1, 2, 3}) spec.types[id] = TokenType::Control;
  spec.types[1] = TokenType::Unknown;
  spec.unk = 1, spec.bos = 2, spec.sep = 3, spec.pad = 0;
  spec.add_bos = true, spec.clean_spaces = true;
  return spec;
}

// The id of a tiny_spec piece, by its text.
TokenId id_of(const std::string& piece) {
  const TokenizerSpec spec = tiny_spec();
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    if (spec.tokens[id] == piece) return static_cast<TokenId>(id);
  }
  ADD_FAILURE() << "no piece " << piece;
  return -1;
}

std::string pieces(const Tokenizer& tokenizer, const std::string& text) {
  std::string out;
  for (TokenId id : tokenizer.encode(text)) {
    if (!out.empty()) out += ' ';
    out += tokenizer.spec().tokens[id];
  }
  return out;
}

TEST(WordPiece, LowercasesAndStripsAccents) {
  const Tokenizer t(tiny_spec());
  EXPECT_EQ(pieces(t, "HeLLo WORLD"), "▁hello ▁world");
  EXPECT_EQ(pieces(t, "Café NAÏVE"), "▁cafe ▁naive");              // precomposed
  EXPECT_EQ(pieces(t, "Cafe\u0301 nai\u0308ve"), "▁cafe ▁naive");  // combining marks typed apart
  EXPECT_EQ(pieces(t, "Σ"), "▁σ");                                 // beyond ASCII and Latin
  EXPECT_EQ(pieces(t, "\u0130"), "▁i");                            // İ: NFD I + dot, dot stripped
}

TEST(WordPiece, SplitsCjkIdeographsIntoWords) {
  const Tokenizer t(tiny_spec());
  EXPECT_EQ(pieces(t, "中文"), "▁中 ▁文");
  EXPECT_EQ(pieces(t, "hello中文world"), "▁hello ▁中 ▁文 ▁world");
}

TEST(WordPiece, IsolatesPunctuationAndAsciiSymbols) {
  const Tokenizer t(tiny_spec());
  EXPECT_EQ(pieces(t, "hello,world!"), "▁hello ▁, ▁world ▁!");
  EXPECT_EQ(pieces(t, "$hello"), "▁$ ▁hello");      // an ASCII symbol counts as punctuation
  EXPECT_EQ(pieces(t, "«hello»"), "▁« ▁hello ▁»");  // Unicode Pi / Pf
  EXPECT_EQ(pieces(t, "hello!!"), "▁hello ▁! ▁!");  // one word per punctuation character
}

TEST(WordPiece, CleansWhitespaceAndControls) {
  const Tokenizer t(tiny_spec());
  EXPECT_EQ(pieces(t, " \t\nhello\u00A0\u3000world\r\n"), "▁hello ▁world");
  EXPECT_EQ(pieces(t, "hel\u200Blo"), "▁hello");  // format character (Cf) removed
  EXPECT_EQ(pieces(t, "hel\x0Blo"), "▁hello");    // a control other than \t \n \r removed
  EXPECT_EQ(pieces(t, "hel\xFFlo"), "▁hello");    // ill-formed byte: U+FFFD, then removed
  EXPECT_EQ(pieces(t, ""), "");
  EXPECT_EQ(pieces(t, " \n\t "), "");
}

TEST(WordPiece, GreedyLongestMatchAndUnknownWords) {
  const Tokenizer t(tiny_spec());
  EXPECT_EQ(pieces(t, "unaffable"), "▁un aff able");
  EXPECT_EQ(pieces(t, "hello"), "▁hello");      // the longest piece wins over "▁hel" + "lo"
  EXPECT_EQ(pieces(t, "unaffablex"), "[UNK]");  // one piece missing: the whole word is unknown
  EXPECT_EQ(pieces(t, "xyz hello"), "[UNK] ▁hello");
  EXPECT_EQ(pieces(t, "aaa"), "▁a a a");
  EXPECT_EQ(pieces(t, std::string(100, 'a')).size(), std::string("▁a").size() + 99 * 2);
  EXPECT_EQ(pieces(t, std::string(101, 'a')), "[UNK]");  // over Hugging Face's 100-character limit
}

TEST(WordPiece, DecodesAsLlamaCpp) {
  const Tokenizer t(tiny_spec());
  EXPECT_EQ(t.decode(t.encode("Hello, World!")), " hello, world!");
  EXPECT_EQ(t.decode(t.encode("unaffable hello")), " unaffable hello");
  EXPECT_EQ(t.decode(t.encode("hello ' s")), " hello's");
  EXPECT_EQ(t.decode(std::vector<TokenId>{2, id_of("▁hello"), 3}), "[CLS] hello[SEP]");
  EXPECT_EQ(t.decode(std::vector<TokenId>{2, id_of("▁hello"), 3}, {.skip_special = true}),
            " hello");
  StreamingDecoder stream(t);
  std::string streamed;
  for (TokenId id : t.encode("unaffable world")) streamed += stream.push(id);
  streamed += stream.flush();
  EXPECT_EQ(streamed, " unaffable world");
}

TEST(WordPiece, RefusesAVocabularyWithoutAnUnknownToken) {
  TokenizerSpec spec = tiny_spec();
  spec.unk.reset();
  EXPECT_THROW(Tokenizer{std::move(spec)}, Error);
}

}  // namespace
}  // namespace sluice::text
