// WordPiece (tokenizer.ggml.model "bert"; BERT, BGE, MiniLM embedders): BERT normalization and
// pre-tokenization (bert_normalizer.h), then each word greedily split longest-match-first into
// vocabulary pieces, or one unknown token when any part of it has no piece. Owns only the
// segmentation of one plain-text fragment and the bytes of one piece; special tokens, [CLS] and
// files belong to Tokenizer and the spec adapters.
#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "text/tokenizer/bert_normalizer.h"
#include "text/tokenizer/segment_model.h"

namespace sluice::text {
namespace {

// llama.cpp's GGUF converter stores a word-initial piece "foo" as "▁foo" and a continuation
// piece "##foo" as "foo" (special "[...]" tokens unchanged), so a word is looked up as "▁word"
// and every piece after the first without a prefix.
constexpr std::string_view kWordStart = "\xE2\x96\x81";  // U+2581

// Hugging Face's WordPiece max_input_chars_per_word: a longer word is one unknown token without
// being looked at. llama.cpp has no such limit (it would split the word); the ids are checked
// against Hugging Face, whose BERT vocabularies all use the default of 100.
constexpr size_t kMaxWordCodePoints = 100;

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};
using PieceMap = std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>>;

bool is_continuation_byte(char byte) {
  return (static_cast<unsigned char>(byte) & 0xC0) == 0x80;
}

class WordPieceModel final : public SegmentModel {
 public:
  explicit WordPieceModel(const TokenizerSpec& spec);

  void encode_fragment(std::string_view fragment, const FragmentContext& context,
                       std::vector<TokenId>& out) const override;
  std::string token_to_bytes(TokenId id) const override;
  void finish_decode(std::string& text, bool at_text_start) const override;

 private:
  void encode_word(const BertWord& word, std::vector<TokenId>& out) const;
  std::optional<TokenId> find(std::string_view piece) const;

  std::vector<std::string> tokens_;  // [n_vocab]
  std::vector<TokenType> types_;     // [n_vocab]
  PieceMap piece_to_id_;
  size_t max_piece_bytes_ = 0;
  TokenId unk_ = -1;
  bool add_space_prefix_ = false;
};

WordPieceModel::WordPieceModel(const TokenizerSpec& spec)
    : tokens_(spec.tokens), types_(spec.types), add_space_prefix_(spec.add_space_prefix) {
  const size_t n_vocab = tokens_.size();
  if (n_vocab == 0) fail("wordpiece tokenizer: the vocabulary is empty");
  if (types_.empty()) types_.assign(n_vocab, TokenType::Normal);
  if (types_.size() != n_vocab)
    fail("wordpiece tokenizer: ", types_.size(), " token types for ", n_vocab, " tokens");
  // Every word with a character outside the vocabulary becomes the unknown token, so there
  // must be one.
  if (!spec.unk) fail("wordpiece tokenizer: the vocabulary names no unknown token");
  if (*spec.unk < 0 || static_cast<size_t>(*spec.unk) >= n_vocab)
    fail("wordpiece tokenizer: unknown-token id ", *spec.unk, " is outside the vocabulary");
  unk_ = *spec.unk;

  piece_to_id_.reserve(n_vocab);
  for (size_t id = 0; id < n_vocab; ++id) {
    // A piece listed twice resolves to its last id, as llama.cpp's token_to_id map does.
    piece_to_id_[tokens_[id]] = static_cast<TokenId>(id);
    max_piece_bytes_ = std::max(max_piece_bytes_, tokens_[id].size());
  }
}

std::optional<TokenId> WordPieceModel::find(std::string_view piece) const {
  auto it = piece_to_id_.find(piece);
  if (it == piece_to_id_.end()) return std::nullopt;
  return it->second;
}

void WordPieceModel::encode_fragment(std::string_view fragment, const FragmentContext& /*context*/,
                                     std::vector<TokenId>& out) const {
  // Every word starts afresh, so where the fragment sits (after a special token or not) does
  // not matter: BERT has no dummy prefix.
  for (const BertWord& word : bert_pre_tokenize(fragment)) encode_word(word, out);
}

// Longest match first from the start of what is left of the word; the ends tried are character
// boundaries only (a piece is well-formed UTF-8, so no other end could match).
void WordPieceModel::encode_word(const BertWord& word, std::vector<TokenId>& out) const {
  if (word.n_code_points > kMaxWordCodePoints) {
    out.push_back(unk_);
    return;
  }
  const std::string text = std::string(kWordStart) + word.text;
  const size_t first_output = out.size();
  for (size_t start = 0; start < text.size();) {
    bool matched = false;
    for (size_t end = std::min(text.size(), start + max_piece_bytes_); end > start; --end) {
      if (end < text.size() && is_continuation_byte(text[end])) continue;
      if (const std::optional<TokenId> id =
              find(std::string_view(text).substr(start, end - start))) {
        out.push_back(*id);
        start = end;
        matched = true;
        break;
      }
    }
    if (!matched) {
      // One piece missing makes the whole word unknown: the pieces found so far are dropped.
      out.resize(first_output);
      out.push_back(unk_);
      return;
    }
  }
}

// As llama.cpp's token_to_piece for WPM: a normal piece with every "▁" turned back into a space
// (so words come out space-separated and continuations glued on), special pieces as written.
std::string WordPieceModel::token_to_bytes(TokenId id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size())
    fail("wordpiece tokenizer: token id ", id, " is outside the vocabulary of ", tokens_.size());
  const std::string& piece = tokens_[id];
  switch (types_[id]) {
    case TokenType::Control:
    case TokenType::Unknown:
    case TokenType::UserDefined:
    case TokenType::Byte:  // WordPiece vocabularies have none; shown as written
      return piece;
    case TokenType::Unused:
      return {};  // llama.cpp renders unused pieces as nothing
    case TokenType::Normal:
    case TokenType::Undefined:
      break;
  }
  std::string text;
  text.reserve(piece.size());
  for (size_t start = 0;;) {
    const size_t hit = piece.find(kWordStart, start);
    text.append(piece, start, hit == std::string::npos ? std::string::npos : hit - start);
    if (hit == std::string::npos) return text;
    text += ' ';
    start = hit + kWordStart.size();
  }
}

// llama.cpp keeps the space the first word's "▁" decodes to (its add_space_prefix is off for
// BERT); only a vocabulary that sets tokenizer.ggml.add_space_prefix has it removed.
void WordPieceModel::finish_decode(std::string& text, bool at_text_start) const {
  if (add_space_prefix_ && at_text_start && !text.empty() && text.front() == ' ') text.erase(0, 1);
}

}  // namespace

std::unique_ptr<SegmentModel> make_wordpiece(const TokenizerSpec& spec) {
  return std::make_unique<WordPieceModel>(spec);
}

}  // namespace sluice::text
