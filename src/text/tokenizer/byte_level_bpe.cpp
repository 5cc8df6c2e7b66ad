// Byte-level BPE (GPT-2 style), the SegmentModel for TokenizerKind::BytePairByteLevel: repair
// invalid UTF-8 as llama.cpp does, pre-tokenize with the regex list, map each pre-token's bytes
// to vocabulary characters, then merge adjacent symbols lowest rank first. Knows nothing of
// special tokens, BOS/EOS or where the spec came from.
#include <algorithm>
#include <array>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/error.h"
#include "text/tokenizer/byte_level_bpe_bytes.h"
#include "text/tokenizer/pre_tokenizer.h"
#include "text/tokenizer/segment_model.h"
#include "text/tokenizer/utf8.h"

namespace sluice::text {
namespace {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// One applicable merge: rank (lower merges first) and the id of the merged token.
struct Merge {
  int32_t rank;
  TokenId merged;
};

uint64_t pair_key(TokenId left, TokenId right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// A symbol of the word being merged; a doubly linked list over a vector.
struct Symbol {
  TokenId id;  // -1: a byte with no vocabulary entry (dropped, as HF and llama.cpp do)
  int prev;
  int next;
};

// A candidate merge of symbols[left] with its successor, valid while both still hold the ids
// recorded here. Ordered lowest rank first, then leftmost, as both references merge.
struct Candidate {
  int32_t rank;
  int left;
  TokenId left_id;
  TokenId right_id;
  TokenId merged;
  bool operator>(const Candidate& other) const {
    return rank != other.rank ? rank > other.rank : left > other.left;
  }
};

std::optional<uint8_t> parse_byte_token(const std::string& text) {
  // "<0xNN>": byte fallback tokens some BPE vocabularies carry.
  if (text.size() != 6 || text.compare(0, 3, "<0x") != 0 || text[5] != '>') return std::nullopt;
  unsigned value = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = text[i];
    const int digit = (c >= '0' && c <= '9')   ? c - '0'
                      : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                      : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                               : -1;
    if (digit < 0) return std::nullopt;
    value = value * 16 + static_cast<unsigned>(digit);
  }
  return static_cast<uint8_t>(value);
}

class ByteLevelBpe final : public SegmentModel {
 public:
  explicit ByteLevelBpe(const TokenizerSpec& spec);

  void encode_fragment(std::string_view fragment, const FragmentContext& context,
                       std::vector<TokenId>& out) const override;
  std::string token_to_bytes(TokenId id) const override { return pieces_[id]; }

 private:
  void index_vocabulary(const TokenizerSpec& spec);
  void index_merges(const TokenizerSpec& spec);
  // Per-call working memory: reused across the pre-tokens of one fragment, never shared
  // between calls, so concurrent encodes need no locking.
  struct Scratch {
    std::vector<Symbol> symbols;
    std::vector<Candidate> heap;  // min-heap by (rank, left)
    std::string word;
    // Pre-token bytes -> ids: natural text repeats words, and a hit skips the merge loop.
    std::unordered_map<std::string, std::vector<TokenId>, StringHash, std::equal_to<>> cache;
  };
  static constexpr size_t kCacheLimit = 1 << 16;

  void encode_word(std::string_view bytes, Scratch& scratch, std::vector<TokenId>& out) const;
  void merge_symbols(Scratch& scratch) const;
  void push_candidate(Scratch& scratch, int left) const;

  std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>> ids_;
  std::unordered_map<uint64_t, Merge> merges_;  // pair_key(left, right) -> merge
  std::array<TokenId, 256> byte_ids_{};         // the token of each single byte, or -1
  std::vector<std::string> pieces_;             // [n_vocab] decoded bytes of each token
  PreTokenizer pre_tokenizer_;
  bool ignore_merges_;
};

std::vector<std::string> regexes_for(const TokenizerSpec& spec) {
  if (!spec.pre_regexes.empty()) return spec.pre_regexes;
  return require_pre_tokenizer(spec.pre_name).regexes;
}

ByteLevelBpe::ByteLevelBpe(const TokenizerSpec& spec)
    : pre_tokenizer_(regexes_for(spec)), ignore_merges_(spec.ignore_merges) {
  index_vocabulary(spec);
  index_merges(spec);
}

void ByteLevelBpe::index_vocabulary(const TokenizerSpec& spec) {
  const size_t n = spec.tokens.size();
  ids_.reserve(n);
  pieces_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& text = spec.tokens[i];
    const auto id = static_cast<TokenId>(i);
    if (!text.empty()) {
      const auto [it, inserted] = ids_.emplace(text, id);
      if (!inserted) {
        fail("tokenizer: duplicate token '", text, "' has ids ", it->second, " and ", id);
      }
    }
    const TokenType type = i < spec.types.size() ? spec.types[i] : TokenType::Normal;
    // Special and added tokens are stored as plain text, the rest as byte-level characters.
    if (type == TokenType::Control || type == TokenType::UserDefined ||
        type == TokenType::Unknown) {
      pieces_[i] = text;
    } else if (auto byte = type == TokenType::Byte ? parse_byte_token(text) : std::nullopt) {
      pieces_[i] = std::string(1, static_cast<char>(*byte));
    } else {
      pieces_[i] = byte_level_to_bytes(text);
    }
  }
  for (unsigned b = 0; b < 256; ++b) {
    std::string key;
    append_utf8(key, byte_to_codepoint(static_cast<uint8_t>(b)));
    const auto it = ids_.find(key);
    byte_ids_[b] = it == ids_.end() ? -1 : it->second;
  }
}

void ByteLevelBpe::index_merges(const TokenizerSpec& spec) {
  merges_.reserve(spec.merges.size());
  std::string joined;
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const std::string& merge = spec.merges[rank];
    // Split at the first space after the first character, as llama.cpp does: a merge's left
    // part is never empty, so "  x"-style entries keep a space-led right part.
    const size_t space = merge.find(' ', 1);
    if (space == std::string::npos) continue;
    const std::string_view left(merge.data(), space);
    const std::string_view right(merge.data() + space + 1, merge.size() - space - 1);
    const auto l = ids_.find(left);
    const auto r = ids_.find(right);
    joined.assign(left).append(right);
    const auto m = ids_.find(std::string_view(joined));
    // Hugging Face refuses a merge whose parts or result are not tokens; such a merge could
    // only produce a symbol that is later dropped, so skipping it changes nothing.
    if (l == ids_.end() || r == ids_.end() || m == ids_.end()) continue;
    merges_.try_emplace(pair_key(l->second, r->second),
                        Merge{static_cast<int32_t>(rank), m->second});
  }
}

void ByteLevelBpe::encode_fragment(std::string_view fragment, const FragmentContext& context,
                                   std::vector<TokenId>& out) const {
  (void)context;
  // Invalid UTF-8 never reaches the regexes: like llama.cpp, each byte that does not start a
  // well-formed sequence becomes U+FFFD (encoded as that character's three bytes).
  std::string repaired;
  if (!is_valid_utf8(fragment)) {
    repaired = repair_utf8_per_byte(fragment);
    fragment = repaired;
  }
  std::vector<std::pair<size_t, size_t>> pieces;
  pre_tokenizer_.split(fragment, pieces);
  Scratch scratch;
  for (const auto& [begin, end] : pieces) {
    encode_word(fragment.substr(begin, end - begin), scratch, out);
  }
}

void ByteLevelBpe::encode_word(std::string_view bytes, Scratch& scratch,
                               std::vector<TokenId>& out) const {
  if (bytes.size() == 1) {  // the common case of a lone space, digit or punctuation mark
    if (const TokenId id = byte_ids_[static_cast<uint8_t>(bytes[0])]; id >= 0) out.push_back(id);
    return;
  }
  if (const auto hit = scratch.cache.find(bytes); hit != scratch.cache.end()) {
    out.insert(out.end(), hit->second.begin(), hit->second.end());
    return;
  }
  const size_t first = out.size();
  if (ignore_merges_) {
    scratch.word.clear();
    append_byte_level(scratch.word, bytes);
    if (const auto it = ids_.find(std::string_view(scratch.word)); it != ids_.end()) {
      out.push_back(it->second);
    }
  }
  if (out.size() == first) {
    auto& symbols = scratch.symbols;
    symbols.resize(bytes.size());
    for (size_t i = 0; i < bytes.size(); ++i) {
      symbols[i] = Symbol{byte_ids_[static_cast<uint8_t>(bytes[i])], static_cast<int>(i) - 1,
                          i + 1 < bytes.size() ? static_cast<int>(i) + 1 : -1};
    }
    merge_symbols(scratch);
    for (int i = 0; i != -1; i = symbols[i].next) {
      if (symbols[i].id >= 0) out.push_back(symbols[i].id);
    }
  }
  if (scratch.cache.size() >= kCacheLimit) scratch.cache.clear();
  scratch.cache.emplace(std::string(bytes), std::vector<TokenId>(out.begin() + first, out.end()));
}

void ByteLevelBpe::push_candidate(Scratch& scratch, int left) const {
  const auto& symbols = scratch.symbols;
  if (left < 0) return;
  const int right = symbols[left].next;
  if (right < 0 || symbols[left].id < 0 || symbols[right].id < 0) return;
  const auto it = merges_.find(pair_key(symbols[left].id, symbols[right].id));
  if (it == merges_.end()) return;
  scratch.heap.push_back(
      Candidate{it->second.rank, left, symbols[left].id, symbols[right].id, it->second.merged});
  std::push_heap(scratch.heap.begin(), scratch.heap.end(), std::greater<Candidate>());
}

void ByteLevelBpe::merge_symbols(Scratch& scratch) const {
  auto& symbols = scratch.symbols;
  auto& heap = scratch.heap;
  heap.clear();
  for (int i = 0; i + 1 < static_cast<int>(symbols.size()); ++i) push_candidate(scratch, i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<Candidate>());
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[top.left];
    // Stale when either side has merged since: the left id changes when it absorbs a
    // neighbour, and a symbol absorbed into another gets id -2.
    if (left.id != top.left_id || left.next < 0 || symbols[left.next].id != top.right_id) continue;
    Symbol& right = symbols[left.next];
    left.id = top.merged;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    right.id = -2;
    push_candidate(scratch, left.prev);
    push_candidate(scratch, top.left);
  }
}

}  // namespace

std::unique_ptr<SegmentModel> make_byte_level_bpe(const TokenizerSpec& spec) {
  return std::make_unique<ByteLevelBpe>(spec);
}

}  // namespace sluice::text
