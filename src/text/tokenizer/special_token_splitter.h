// SpecialTokenSplitter: cuts special and added tokens out of input text before segmentation,
// with llama.cpp's tokenizer_st_partition semantics — longest token text first, each token
// splitting every remaining text fragment at all its occurrences, lstrip/rstrip swallowing
// ASCII whitespace. Knows token texts and types only; nothing of segmentation or decoding.
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
  explicit SpecialTokenSplitter(const TokenizerSpec& spec);

  // Control and unknown-type tokens are matched only when `parse_special`; user-defined ones
  // always (Hugging Face splits non-special added tokens before anything else too).
  std::vector<Fragment> split(std::string_view text, bool parse_special) const;

 private:
  struct Candidate {
    TokenId id;
    std::string_view text;  // into the spec's token strings, which outlive this object
    bool control;           // Control or Unknown type: only with parse_special
    bool lstrip;
    bool rstrip;
  };
  // A byte trie over the candidates' texts, used to find which candidates occur at all, so
  // the ordered partition only scans for those (vocabularies carry thousands of unused ones).
  struct TrieNode {
    std::vector<std::pair<unsigned char, int>> children;  // sorted by byte
    int candidate = -1;                                   // index into candidates_, or -1
  };

  void build_trie();
  std::vector<bool> present(std::string_view text, bool parse_special) const;
  void split_at(const Candidate& candidate, std::string_view text,
                std::vector<Fragment>& fragments) const;

  std::vector<Candidate> candidates_;  // longest text first, then lowest id
  std::vector<TrieNode> trie_;
};

}  // namespace sluice::text
