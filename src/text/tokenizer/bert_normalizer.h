// BERT text normalization and pre-tokenization, as Hugging Face's BertNormalizer (clean text,
// isolate CJK ideographs, NFD + strip non-spacing marks, lowercase) followed by
// BertPreTokenizer (split on whitespace, every punctuation character a word of its own) do it
// for uncased BERT vocabularies. Knows nothing of vocabularies: it only turns text into words.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sluice::text {

struct BertWord {
  std::string text;          // UTF-8, normalized
  size_t n_code_points = 0;  // WordPiece refuses words longer than a limit counted in these
};

// Normalizes `text` (any bytes: ill-formed UTF-8 is repaired per byte, and the U+FFFD that
// repair makes is then dropped as BERT's cleaner drops it) and splits it into words.
std::vector<BertWord> bert_pre_tokenize(std::string_view text);

}  // namespace sluice::text
