// SentencePiece-style BPE (tokenizer.ggml.model "llama"; Llama 2, Phi-3, Gemma): spaces become
// U+2581, an optional dummy-prefix space, adjacent pieces merged greedily by score (GGUF) or by
// merge rank (tokenizer.json), characters outside the vocabulary spelled as <0xNN> byte tokens.
// Owns only the segmentation of one plain-text fragment and the bytes of one piece; special
// tokens, BOS/EOS and files belong to Tokenizer and the spec adapters.
#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "text/tokenizer/segment_model.h"

namespace sluice::text {
namespace {

constexpr std::string_view kEscapedSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

// Bytes in the UTF-8 sequence a lead byte starts. A stray continuation byte counts as one
// character, as llama.cpp's splitter does, so invalid input still segments deterministically.
size_t utf8_sequence_length(uint8_t lead) {
  static constexpr std::array<uint8_t, 16> kByHighNibble = {1, 1, 1, 1, 1, 1, 1, 1,
                                                            1, 1, 1, 1, 2, 2, 3, 4};
  return kByHighNibble[lead >> 4];
}

// Hashes std::string and std::string_view alike so lookups of substrings allocate nothing.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};
using PieceMap = std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>>;

// The byte a "<0xNN>" piece stands for, if the piece has that exact form.
std::optional<uint8_t> parse_byte_piece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return std::nullopt;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int high = hex(piece[3]);
  const int low = hex(piece[4]);
  if (high < 0 || low < 0) return std::nullopt;
  return static_cast<uint8_t>(high * 16 + low);
}

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  std::string result;
  result.reserve(text.size() + text.size() / 2);
  size_t start = 0;
  for (size_t hit = text.find(from); hit != std::string::npos; hit = text.find(from, start)) {
    result.append(text, start, hit - start);
    result.append(to);
    start = hit + from.size();
  }
  result.append(text, start, std::string::npos);
  text = std::move(result);
}

// One run of bytes in the text being segmented; merged symbols absorb their right neighbour
// and leave it empty, so indices stay stable while the linked list shrinks.
struct Symbol {
  int prev = -1;
  int next = -1;
  size_t start = 0;
  size_t size = 0;
  TokenId id = -1;  // rank mode: the piece this symbol is; score mode: unused
};

// A candidate merge of two adjacent symbols. Both reference implementations order candidates
// best-first and break ties by the leftmost position; a candidate is stale once either side
// has changed size, which the recorded sizes detect.
struct Candidate {
  double priority = 0;  // score mode: the merged piece's score; rank mode: -rank
  int left = 0;
  int right = 0;
  size_t left_size = 0;
  size_t right_size = 0;
  TokenId merged = -1;  // rank mode: the id the merge produces
};
struct CandidateOrder {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.priority < b.priority || (a.priority == b.priority && a.left > b.left);
  }
};
using CandidateQueue = std::priority_queue<Candidate, std::vector<Candidate>, CandidateOrder>;

class SentencePieceModel final : public SegmentModel {
 public:
  explicit SentencePieceModel(const TokenizerSpec& spec);

  void encode_fragment(std::string_view fragment, const FragmentContext& context,
                       std::vector<TokenId>& out) const override;
  std::string normalize_fragment(std::string_view fragment,
                                 const FragmentContext& context) const override;
  void encode_normalized(std::string_view normalized, std::vector<TokenId>& out) const override;
  std::string token_to_bytes(TokenId id) const override;
  std::string form_to_bytes(std::string_view form) const override;
  void finish_decode(std::string& text, bool at_text_start) const override;

 private:
  // GGUF vocabularies carry scores: llama.cpp merges the adjacent pair whose concatenation is
  // the best-scoring piece. tokenizer.json carries ranked merges instead: Hugging Face merges
  // the listed pair of lowest rank. The two agree on every vocabulary converted from a
  // SentencePiece model, whose merges are ranked by the merged piece's score.
  enum class Mode { Scores, Ranks };

  void load_merges(const TokenizerSpec& spec);
  void segment_by_scores(std::string_view text, std::vector<TokenId>& out) const;
  void segment_by_ranks(std::string_view text, std::vector<TokenId>& out) const;
  void push_score_candidate(std::string_view text, const std::vector<Symbol>& symbols, int left,
                            int right, CandidateQueue& queue) const;
  void push_rank_candidate(const std::vector<Symbol>& symbols, int left, int right,
                           CandidateQueue& queue) const;
  static void merge_all(std::vector<Symbol>& symbols, CandidateQueue& queue,
                        const std::function<void(int, int)>& push);
  void emit_bytes(std::string_view bytes, std::vector<TokenId>& out) const;
  std::optional<TokenId> find(std::string_view piece) const;

  Mode mode_ = Mode::Scores;
  std::vector<std::string> tokens_;  // [n_vocab]
  std::vector<TokenType> types_;     // [n_vocab]
  std::vector<float> scores_;        // [n_vocab]; zeros when the spec has none
  PieceMap piece_to_id_;
  std::unordered_map<uint64_t, std::pair<int32_t, TokenId>> merges_;  // (left, right) -> rank, id
  std::array<TokenId, 256> byte_ids_{};  // -1 where the vocabulary has no piece for the byte
  std::optional<TokenId> unk_;
  bool add_space_prefix_ = false;
  bool escape_whitespaces_ = true;
};

SentencePieceModel::SentencePieceModel(const TokenizerSpec& spec)
    : tokens_(spec.tokens),
      types_(spec.types),
      scores_(spec.scores),
      unk_(spec.unk),
      add_space_prefix_(spec.add_space_prefix),
      escape_whitespaces_(spec.escape_whitespaces) {
  const size_t n_vocab = tokens_.size();
  if (n_vocab == 0) fail("sentencepiece tokenizer: the vocabulary is empty");
  if (types_.empty()) types_.assign(n_vocab, TokenType::Normal);
  if (types_.size() != n_vocab)
    fail("sentencepiece tokenizer: ", types_.size(), " token types for ", n_vocab, " tokens");
  if (!scores_.empty() && scores_.size() != n_vocab)
    fail("sentencepiece tokenizer: ", scores_.size(), " scores for ", n_vocab, " tokens");
  if (unk_ && (*unk_ < 0 || static_cast<size_t>(*unk_) >= n_vocab))
    fail("sentencepiece tokenizer: unknown-token id ", *unk_, " is outside the vocabulary");

  piece_to_id_.reserve(n_vocab);
  for (size_t id = 0; id < n_vocab; ++id) {
    // A piece listed twice resolves to its last id, as llama.cpp's token_to_id map does.
    piece_to_id_[tokens_[id]] = static_cast<TokenId>(id);
  }
  // The <0xNN> piece first; failing that the byte as a one-byte piece (llama.cpp's fallback).
  for (int byte = 0; byte < 256; ++byte) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    const std::string piece = {'<', '0', 'x', kHex[byte >> 4], kHex[byte & 15], '>'};
    std::optional<TokenId> id = find(piece);
    if (!id) id = find(std::string(1, static_cast<char>(byte)));
    byte_ids_[byte] = id.value_or(-1);
  }

  if (scores_.empty() && !spec.merges.empty()) {
    mode_ = Mode::Ranks;
    load_merges(spec);
  } else if (scores_.empty()) {
    scores_.assign(n_vocab, 0.0f);  // llama.cpp's default when a GGUF has no scores
  }
}

std::optional<TokenId> SentencePieceModel::find(std::string_view piece) const {
  auto it = piece_to_id_.find(piece);
  if (it == piece_to_id_.end()) return std::nullopt;
  return it->second;
}

uint64_t pair_key(TokenId left, TokenId right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

void SentencePieceModel::load_merges(const TokenizerSpec& spec) {
  merges_.reserve(spec.merges.size());
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const std::string& merge = spec.merges[rank];
    // "left right": pieces never hold a plain space (it is escaped to U+2581), but be
    // tolerant and take the first split whose halves are both pieces.
    std::optional<TokenId> left, right;
    for (size_t space = merge.find(' '); space != std::string::npos;
         space = merge.find(' ', space + 1)) {
      left = find(std::string_view(merge).substr(0, space));
      right = find(std::string_view(merge).substr(space + 1));
      if (left && right) break;
    }
    if (!left || !right)
      fail("sentencepiece tokenizer: merge ", rank, " '", merge, "' is not two known pieces");
    const std::string merged = tokens_[*left] + tokens_[*right];
    const std::optional<TokenId> id = find(merged);
    if (!id)
      fail("sentencepiece tokenizer: merge ", rank, " '", merge, "' makes '", merged,
           "', which is not in the vocabulary");
    // The first (lowest-rank) listing of a pair wins, as in Hugging Face's merge table.
    merges_.emplace(pair_key(*left, *right), std::make_pair(static_cast<int32_t>(rank), *id));
  }
}

void SentencePieceModel::encode_fragment(std::string_view fragment, const FragmentContext& context,
                                         std::vector<TokenId>& out) const {
  encode_normalized(normalize_fragment(fragment, context), out);
}

std::string SentencePieceModel::normalize_fragment(std::string_view fragment,
                                                   const FragmentContext& context) const {
  // llama.cpp never hands an empty fragment to the segmenter, so it gets no dummy prefix
  // (nor does Hugging Face's Prepend normalizer prefix an empty string).
  if (fragment.empty()) return {};
  std::string text;
  text.reserve(fragment.size() + 4);
  // The dummy prefix goes before the first fragment and after every special token: llama.cpp's
  // SPM path and Hugging Face's legacy Prepend("▁") normalizer (applied per added-token split)
  // agree on this.
  if (add_space_prefix_ && (context.at_text_start || context.after_special)) text += ' ';
  text.append(fragment);
  if (escape_whitespaces_) replace_all(text, " ", kEscapedSpace);
  return text;
}

void SentencePieceModel::encode_normalized(std::string_view normalized,
                                           std::vector<TokenId>& out) const {
  if (normalized.empty()) return;
  if (mode_ == Mode::Scores) {
    segment_by_scores(normalized, out);
  } else {
    segment_by_ranks(normalized, out);
  }
}

// Splits `text` into one symbol per UTF-8 character.
std::vector<Symbol> split_characters(std::string_view text) {
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t offset = 0; offset < text.size();) {
    Symbol symbol;
    symbol.start = offset;
    symbol.size =
        std::min(utf8_sequence_length(static_cast<uint8_t>(text[offset])), text.size() - offset);
    offset += symbol.size;
    symbol.prev = static_cast<int>(symbols.size()) - 1;
    symbol.next = offset == text.size() ? -1 : static_cast<int>(symbols.size()) + 1;
    symbols.push_back(symbol);
  }
  return symbols;
}

// Pops candidates best-first, merging the right symbol of each still-valid one into its left
// and offering the new neighbour pairs through `push`.
void SentencePieceModel::merge_all(std::vector<Symbol>& symbols, CandidateQueue& queue,
                                   const std::function<void(int, int)>& push) {
  while (!queue.empty()) {
    const Candidate candidate = queue.top();
    queue.pop();
    Symbol& left = symbols[candidate.left];
    Symbol& right = symbols[candidate.right];
    if (left.size == 0 || right.size == 0 || left.size != candidate.left_size ||
        right.size != candidate.right_size) {
      continue;
    }
    left.size += right.size;
    left.id = candidate.merged;
    right.size = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = candidate.left;
    push(left.prev, candidate.left);
    push(candidate.left, left.next);
  }
}

void SentencePieceModel::push_score_candidate(std::string_view text,
                                              const std::vector<Symbol>& symbols, int left,
                                              int right, CandidateQueue& queue) const {
  if (left < 0 || right < 0) return;
  const Symbol& a = symbols[left];
  const Symbol& b = symbols[right];
  const std::optional<TokenId> id = find(text.substr(a.start, a.size + b.size));
  if (!id) return;
  queue.push(Candidate{scores_[*id], left, right, a.size, b.size, *id});
}

void SentencePieceModel::segment_by_scores(std::string_view text, std::vector<TokenId>& out) const {
  std::vector<Symbol> symbols = split_characters(text);
  CandidateQueue queue;
  auto push = [&](int left, int right) { push_score_candidate(text, symbols, left, right, queue); };
  for (size_t i = 1; i < symbols.size(); ++i) push(static_cast<int>(i) - 1, static_cast<int>(i));
  merge_all(symbols, queue, push);

  // Every merged symbol is a piece by construction; a single character may not be, and is then
  // spelled byte by byte.
  for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].start, symbols[i].size);
    if (const std::optional<TokenId> id = find(piece)) {
      out.push_back(*id);
    } else {
      emit_bytes(piece, out);
    }
  }
}

// Bytes of a character with no piece: <0xNN> tokens, or the unknown token when the vocabulary
// has no byte pieces (llama.cpp would abort there; SentencePiece emits <unk>).
void SentencePieceModel::emit_bytes(std::string_view bytes, std::vector<TokenId>& out) const {
  for (char byte : bytes) {
    if (byte_ids_[static_cast<uint8_t>(byte)] < 0) {
      if (!unk_) fail("sentencepiece tokenizer: no byte piece and no unknown token for input");
      out.push_back(*unk_);
      return;
    }
  }
  for (char byte : bytes) out.push_back(byte_ids_[static_cast<uint8_t>(byte)]);
}

void SentencePieceModel::push_rank_candidate(const std::vector<Symbol>& symbols, int left,
                                             int right, CandidateQueue& queue) const {
  if (left < 0 || right < 0) return;
  const Symbol& a = symbols[left];
  const Symbol& b = symbols[right];
  if (a.id < 0 || b.id < 0) return;
  auto it = merges_.find(pair_key(a.id, b.id));
  if (it == merges_.end()) return;
  queue.push(Candidate{-static_cast<double>(it->second.first), left, right, a.size, b.size,
                       it->second.second});
}

// Hugging Face's BPE with byte_fallback and fuse_unk: a character with no piece becomes its
// <0xNN> pieces before merging (or one <unk> per run of such characters), then ranked merges.
void SentencePieceModel::segment_by_ranks(std::string_view text, std::vector<TokenId>& out) const {
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  auto add = [&](TokenId id, size_t start, size_t size) {
    Symbol symbol;
    symbol.start = start;
    symbol.size = size;
    symbol.id = id;
    symbol.prev = static_cast<int>(symbols.size()) - 1;
    symbols.push_back(symbol);
  };
  bool in_unknown_run = false;
  for (size_t offset = 0; offset < text.size();) {
    const size_t size =
        std::min(utf8_sequence_length(static_cast<uint8_t>(text[offset])), text.size() - offset);
    const std::string_view character = text.substr(offset, size);
    const size_t start = offset;
    offset += size;
    if (const std::optional<TokenId> id = find(character)) {
      add(*id, start, size);
      in_unknown_run = false;
      continue;
    }
    bool all_bytes = true;
    for (char byte : character) all_bytes = all_bytes && byte_ids_[static_cast<uint8_t>(byte)] >= 0;
    if (all_bytes) {
      for (size_t i = 0; i < size; ++i)
        add(byte_ids_[static_cast<uint8_t>(character[i])], start + i, 1);
      in_unknown_run = false;
      continue;
    }
    if (!unk_) continue;  // no byte pieces and no <unk>: Hugging Face drops the character
    if (in_unknown_run) {
      symbols.back().size += size;
    } else {
      add(*unk_, start, size);
      in_unknown_run = true;
    }
  }
  for (size_t i = 0; i + 1 < symbols.size(); ++i) symbols[i].next = static_cast<int>(i) + 1;

  CandidateQueue queue;
  auto push = [&](int left, int right) { push_rank_candidate(symbols, left, right, queue); };
  for (size_t i = 1; i < symbols.size(); ++i) push(static_cast<int>(i) - 1, static_cast<int>(i));
  merge_all(symbols, queue, push);
  for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) out.push_back(symbols[i].id);
}

std::string SentencePieceModel::token_to_bytes(TokenId id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size())
    fail("sentencepiece tokenizer: token id ", id, " is outside the vocabulary of ",
         tokens_.size());
  const std::string& piece = tokens_[id];
  switch (types_[id]) {
    case TokenType::Byte:
      if (const std::optional<uint8_t> byte = parse_byte_piece(piece))
        return std::string(1, static_cast<char>(*byte));
      return piece;
    case TokenType::Control:
    case TokenType::Unknown:
      // Shown as written; whether they appear at all is Tokenizer's decision.
      return piece;
    case TokenType::Unused:
      return {};  // llama.cpp renders unused pieces as nothing
    case TokenType::UserDefined:
      // Hugging Face's Replace("▁", " ") decoder runs over added tokens too (Gemma's "▁▁" runs
      // are user-defined); llama.cpp would print a stored ▁ as is, but its converters store
      // those runs as plain spaces, so both agree on the text.
    case TokenType::Normal:
    case TokenType::Undefined:
      break;
  }
  std::string text = piece;
  replace_all(text, kEscapedSpace, " ");
  return text;
}

// Hugging Face's decoder (Replace "▁" → " ", ByteFallback, Fuse) treats the form as any piece.
std::string SentencePieceModel::form_to_bytes(std::string_view form) const {
  std::string text(form);
  replace_all(text, kEscapedSpace, " ");
  return text;
}

// The space the dummy prefix put before the first word is not part of the text: llama.cpp
// strips it from the first piece, Hugging Face's Strip(" ", 1, 0) decoder from the whole text.
void SentencePieceModel::finish_decode(std::string& text, bool at_text_start) const {
  if (add_space_prefix_ && at_text_start && !text.empty() && text.front() == ' ') text.erase(0, 1);
}

}  // namespace

std::unique_ptr<SegmentModel> make_sentencepiece(const TokenizerSpec& spec) {
  return std::make_unique<SentencePieceModel>(spec);
}

}  // namespace sluice::text
