// SpecialTokenSplitter: cuts special and added tokens out of input text before segmentation.
// Two match orders (tokenizer_spec.h AddedTokenMatch): llama.cpp's tokenizer_st_partition —
// longest token text first, each token splitting every remaining text fragment at all its
// occurrences, lstrip/rstrip swallowing ASCII whitespace — for GGUF; and Hugging Face
// tokenizers' AddedVocabulary — one leftmost-longest scan, lstrip/rstrip swallowing Unicode
// whitespace — for tokenizer.json, whose `normalized` tokens get a splitter of their own that
// runs over normalized text. Knows token texts and types only; nothing of segmentation.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "text/tokenizer/tokenizer_spec.h"

namespace sluice::text {

// A piece of the input: a special token (token >= 0) or plain text [begin, end) (token -1).
struct Fragment {
  TokenId token = -1;
  size_t begin = 0;
  size_t end = 0;
};

class SpecialTokenSplitter {
 public:
  // The added tokens matched in raw text: every Control, Unknown and UserDefined token except
  // those in spec.normalized_added, in the spec's match order.
  explicit SpecialTokenSplitter(const TokenizerSpec& spec);
  // The spec's normalized added tokens, matched by their forms (leftmost-longest: only
  // tokenizer.json has them). The spec must outlive the splitter.
  static SpecialTokenSplitter for_normalized_tokens(const TokenizerSpec& spec);

  bool empty() const { return candidates_.empty(); }

  // Control and unknown-type tokens are matched only when `parse_special`; user-defined ones
  // always (Hugging Face splits non-special added tokens before anything else too).
  std::vector<Fragment> split(std::string_view text, bool parse_special) const;

 private:
  struct Candidate {
    TokenId id;
    std::string_view text;  // into the spec's strings, which outlive this object
    bool control;           // Control or Unknown type: only with parse_special
    bool lstrip;
    bool rstrip;
  };
  // A byte trie over the candidates' texts: which candidates occur at all (llama.cpp order,
  // so the ordered partition only scans for those) or which is longest at a position.
  struct TrieNode {
    std::vector<std::pair<unsigned char, int>> children;  // sorted by byte
    int candidate = -1;                                   // index into candidates_, or -1
  };

  SpecialTokenSplitter(std::vector<Candidate> candidates, AddedTokenMatch order);
  void build_trie();
  int longest_at(std::string_view text, size_t pos) const;
  std::vector<bool> present(std::string_view text, bool parse_special) const;
  void split_at(const Candidate& candidate, std::string_view text,
                std::vector<Fragment>& fragments) const;
  std::vector<Fragment> split_longest_token_first(std::string_view text, bool parse_special) const;
  std::vector<Fragment> split_leftmost_longest(std::string_view text, bool parse_special) const;

  std::vector<Candidate> candidates_;  // longest text first, then lowest id
  AddedTokenMatch order_ = AddedTokenMatch::LongestTokenFirst;
  std::vector<TrieNode> trie_;
};

}  // namespace sluice::text
