// SpecialTokenSplitter (special_token_splitter.h). llama.cpp's order — for each special token,
// longest first, every text fragment is split at all of its leftmost non-overlapping
// occurrences — and tokenizers' leftmost-longest scan decide overlaps such as "ab" vs "bcd"
// differently, so each source gets its reference's order. A trie over the token texts keeps
// the cost proportional to the text rather than to text length times vocabulary specials.
#include "text/tokenizer/special_token_splitter.h"

#include <algorithm>

#include "text/tokenizer/utf8.h"

namespace sluice::text {
namespace {

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

// Unicode White_Space: what `\s` means in the Rust regexes tokenizers strips with.
bool is_unicode_space(char32_t c) {
  return (c >= 0x9 && c <= 0xD) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// Start of the run of whitespace that ends at `end`, going no further left than `floor`.
size_t space_run_before(std::string_view text, size_t end, size_t floor, bool unicode) {
  while (end > floor) {
    if (!unicode) {
      if (!is_ascii_space(text[end - 1])) break;
      --end;
      continue;
    }
    size_t start = end - 1;
    while (start > floor && end - start < 4 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) {
      --start;
    }
    char32_t cp = 0;
    if (decode_utf8(text, start, cp) != end - start || !is_unicode_space(cp)) break;
    end = start;
  }
  return end;
}

// End of the run of whitespace that starts at `begin`, going no further right than `limit`.
size_t space_run_after(std::string_view text, size_t begin, size_t limit, bool unicode) {
  while (begin < limit) {
    if (!unicode) {
      if (!is_ascii_space(text[begin])) break;
      ++begin;
      continue;
    }
    char32_t cp = 0;
    const size_t length = decode_utf8(text, begin, cp);
    if (length == 0 || begin + length > limit || !is_unicode_space(cp)) break;
    begin += length;
  }
  return begin;
}

bool contains(const std::vector<TokenId>& ids, TokenId id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

bool is_normalized(const TokenizerSpec& spec, TokenId id) {
  return std::any_of(spec.normalized_added.begin(), spec.normalized_added.end(),
                     [id](const NormalizedAddedToken& token) { return token.id == id; });
}

bool is_control(TokenType type) {
  return type == TokenType::Control || type == TokenType::Unknown;
}

}  // namespace

SpecialTokenSplitter::SpecialTokenSplitter(const TokenizerSpec& spec)
    : order_(spec.added_token_match) {
  for (size_t i = 0; i < spec.tokens.size(); ++i) {
    const TokenType type = spec.types[i];
    if (!(is_control(type) || type == TokenType::UserDefined) || spec.tokens[i].empty()) continue;
    const auto id = static_cast<TokenId>(i);
    if (!spec.normalized_added.empty() && is_normalized(spec, id)) continue;
    candidates_.push_back(Candidate{id, spec.tokens[i], is_control(type),
                                    contains(spec.lstrip_ids, id), contains(spec.rstrip_ids, id)});
  }
  std::stable_sort(
      candidates_.begin(), candidates_.end(),
      [](const Candidate& a, const Candidate& b) { return a.text.size() > b.text.size(); });
  build_trie();
}

SpecialTokenSplitter::SpecialTokenSplitter(std::vector<Candidate> candidates, AddedTokenMatch order)
    : candidates_(std::move(candidates)), order_(order) {
  build_trie();
}

SpecialTokenSplitter SpecialTokenSplitter::for_normalized_tokens(const TokenizerSpec& spec) {
  std::vector<Candidate> candidates;
  for (const NormalizedAddedToken& token : spec.normalized_added) {
    if (token.form.empty()) continue;
    candidates.push_back(Candidate{token.id, token.form, is_control(spec.types[token.id]),
                                   contains(spec.lstrip_ids, token.id),
                                   contains(spec.rstrip_ids, token.id)});
  }
  return SpecialTokenSplitter(std::move(candidates), AddedTokenMatch::LeftmostLongest);
}

void SpecialTokenSplitter::build_trie() {
  trie_.assign(1, TrieNode{});
  for (size_t c = 0; c < candidates_.size(); ++c) {
    int node = 0;
    for (const char ch : candidates_[c].text) {
      const auto byte = static_cast<unsigned char>(ch);
      auto& children = trie_[node].children;
      auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, -1));
      if (it == children.end() || it->first != byte) {
        const int child = static_cast<int>(trie_.size());
        it = children.insert(it, {byte, child});
        trie_.push_back(TrieNode{});  // invalidates `children`; `child` stays valid
        node = child;
      } else {
        node = it->second;
      }
    }
    // A text listed twice resolves to its last id, as a text -> id map built in order does.
    trie_[node].candidate = static_cast<int>(c);
  }
}

// The candidate with the longest text that starts at `pos`, or -1.
int SpecialTokenSplitter::longest_at(std::string_view text, size_t pos) const {
  int node = 0, longest = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto& children = trie_[node].children;
    const auto byte = static_cast<unsigned char>(text[i]);
    const auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, -1));
    if (it == children.end() || it->first != byte) break;
    node = it->second;
    if (trie_[node].candidate >= 0) longest = trie_[node].candidate;
  }
  return longest;
}

std::vector<bool> SpecialTokenSplitter::present(std::string_view text, bool parse_special) const {
  std::vector<bool> found(candidates_.size(), false);
  for (size_t start = 0; start < text.size(); ++start) {
    int node = 0;
    for (size_t i = start; i < text.size(); ++i) {
      const auto& children = trie_[node].children;
      const auto byte = static_cast<unsigned char>(text[i]);
      const auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, -1));
      if (it == children.end() || it->first != byte) break;
      node = it->second;
      const int c = trie_[node].candidate;
      if (c >= 0 && (parse_special || !candidates_[c].control)) found[c] = true;
    }
  }
  return found;
}

void SpecialTokenSplitter::split_at(const Candidate& candidate, std::string_view text,
                                    std::vector<Fragment>& fragments) const {
  std::vector<Fragment> next;
  next.reserve(fragments.size() + 2);
  for (const Fragment& fragment : fragments) {
    if (fragment.token >= 0) {
      next.push_back(fragment);
      continue;
    }
    size_t begin = fragment.begin;
    const std::string_view window = text.substr(0, fragment.end);
    while (begin < fragment.end) {
      const size_t match = window.find(candidate.text, begin);
      if (match == std::string_view::npos) break;
      const size_t left_end =
          candidate.lstrip ? space_run_before(text, match, begin, false) : match;
      if (left_end > begin) next.push_back(Fragment{-1, begin, left_end});
      next.push_back(Fragment{candidate.id, match, match + candidate.text.size()});
      begin = match + candidate.text.size();
      if (candidate.rstrip) begin = space_run_after(text, begin, fragment.end, false);
    }
    if (begin < fragment.end) next.push_back(Fragment{-1, begin, fragment.end});
  }
  fragments.swap(next);
}

std::vector<Fragment> SpecialTokenSplitter::split_longest_token_first(std::string_view text,
                                                                      bool parse_special) const {
  std::vector<Fragment> fragments{Fragment{-1, 0, text.size()}};
  const std::vector<bool> found = present(text, parse_special);
  for (size_t c = 0; c < candidates_.size(); ++c) {
    if (found[c]) split_at(candidates_[c], text, fragments);
  }
  return fragments;
}

// tokenizers' find_matches: a token it may not match here (special, without parse_special) is
// still consumed by the scan, so no shorter token inside it is looked for. A stripped token
// covers the whitespace it swallows, but never text an earlier token already took.
std::vector<Fragment> SpecialTokenSplitter::split_leftmost_longest(std::string_view text,
                                                                   bool parse_special) const {
  std::vector<Fragment> fragments;
  size_t taken = 0;  // end of the last token's span
  for (size_t pos = 0; pos < text.size();) {
    const int c = longest_at(text, pos);
    if (c < 0) {
      ++pos;
      continue;
    }
    const Candidate& candidate = candidates_[c];
    size_t begin = pos, end = pos + candidate.text.size();
    pos = end;
    if (candidate.control && !parse_special) continue;
    if (candidate.lstrip) begin = space_run_before(text, begin, taken, true);
    if (candidate.rstrip) end = space_run_after(text, end, text.size(), true);
    if (taken < begin) fragments.push_back(Fragment{-1, taken, begin});
    fragments.push_back(Fragment{candidate.id, begin, end});
    taken = pos = end;
  }
  if (taken < text.size()) fragments.push_back(Fragment{-1, taken, text.size()});
  return fragments;
}

std::vector<Fragment> SpecialTokenSplitter::split(std::string_view text, bool parse_special) const {
  if (text.empty()) return {};
  if (candidates_.empty()) return {Fragment{-1, 0, text.size()}};
  return order_ == AddedTokenMatch::LeftmostLongest
             ? split_leftmost_longest(text, parse_special)
             : split_longest_token_first(text, parse_special);
}

}  // namespace sluice::text
