// SpecialTokenSplitter (special_token_splitter.h). The partition follows llama.cpp's order
// exactly — for each special token, longest first, every text fragment is split at all of its
// leftmost non-overlapping occurrences — because that order decides overlaps such as "<a>" vs
// "<a><b>". A trie pass first finds which tokens occur at all, which keeps the cost
// proportional to the text rather than to text length times vocabulary specials.
#include "text/tokenizer/special_token_splitter.h"

#include <algorithm>

namespace sluice::text {
namespace {

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

bool contains(const std::vector<TokenId>& ids, TokenId id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

SpecialTokenSplitter::SpecialTokenSplitter(const TokenizerSpec& spec) {
  for (size_t i = 0; i < spec.tokens.size(); ++i) {
    const TokenType type = spec.types[i];
    const bool control = type == TokenType::Control || type == TokenType::Unknown;
    if (!(control || type == TokenType::UserDefined) || spec.tokens[i].empty()) continue;
    const auto id = static_cast<TokenId>(i);
    candidates_.push_back(Candidate{id, spec.tokens[i], control, contains(spec.lstrip_ids, id),
                                    contains(spec.rstrip_ids, id)});
  }
  std::stable_sort(
      candidates_.begin(), candidates_.end(),
      [](const Candidate& a, const Candidate& b) { return a.text.size() > b.text.size(); });
  build_trie();
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
    trie_[node].candidate = static_cast<int>(c);
  }
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
      size_t left_end = match;
      if (candidate.lstrip) {
        while (left_end > begin && is_ascii_space(text[left_end - 1])) --left_end;
      }
      if (left_end > begin) next.push_back(Fragment{-1, begin, left_end});
      next.push_back(Fragment{candidate.id, match, match + candidate.text.size()});
      begin = match + candidate.text.size();
      if (candidate.rstrip) {
        while (begin < fragment.end && is_ascii_space(text[begin])) ++begin;
      }
    }
    if (begin < fragment.end) next.push_back(Fragment{-1, begin, fragment.end});
  }
  fragments.swap(next);
}

std::vector<Fragment> SpecialTokenSplitter::split(std::string_view text, bool parse_special) const {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back(Fragment{-1, 0, text.size()});
  if (candidates_.empty()) return fragments;
  const std::vector<bool> found = present(text, parse_special);
  for (size_t c = 0; c < candidates_.size(); ++c) {
    if (found[c]) split_at(candidates_[c], text, fragments);
  }
  return fragments;
}

}  // namespace sluice::text
