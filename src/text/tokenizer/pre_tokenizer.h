// Pre-tokenization of byte-level BPE: the table from every tokenizer.ggml.pre name llama.cpp
// knows to its split regexes (and the vocabulary flags that name implies), and PreTokenizer,
// which runs such a list with PCRE2 (UTF + UCP, JIT when available). Knows nothing of merges,
// vocabularies or the byte mapping: it cuts valid UTF-8 text into pieces.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::text {

// What a tokenizer.ggml.pre name stands for, per llama.cpp's llama-vocab.cpp. The flags are
// the defaults that name sets; GGUF keys (tokenizer.ggml.add_bos_token, …) may override them.
struct PreTokenizerInfo {
  std::vector<std::string> regexes;  // applied in order, each splitting the previous pieces
  bool ignore_merges = false;        // a pre-token found whole in the vocabulary wins
  bool add_bos = false;
  bool clean_spaces = true;  // llama.cpp's base setting for gpt2 vocabularies
};

// The split regexes for `pre_name`; nullopt when the name is unknown. An empty name means
// "key missing" and gives llama.cpp's default set, as llama.cpp does (with a warning there).
std::optional<std::vector<std::string>> pre_tokenizer_regexes(std::string_view pre_name);
// The same plus the flags; nullopt when the name is unknown.
std::optional<PreTokenizerInfo> pre_tokenizer_info(std::string_view pre_name);
// As pre_tokenizer_info, but an unknown or refused name is a sluice::Error
// "unsupported pre-tokenizer 'X'" (refused: the SentencePiece-style BPE names that work on raw
// UTF-8 with U+2581 spaces rather than on byte-level text, and "whitespace").
PreTokenizerInfo require_pre_tokenizer(std::string_view pre_name);
// Every name the table accepts, and every name it refuses (for docs and tests).
std::vector<std::string> supported_pre_tokenizers();
std::vector<std::string> refused_pre_tokenizers();

// Runs a regex list the way llama.cpp's unicode_regex_split and Hugging Face's Split
// pre-tokenizer (behaviour "isolated") do: each regex is matched inside every piece the
// previous one produced, and both the matches and the gaps between them become pieces, so the
// pieces always tile the input. Matching sees only the piece, so lookaheads such as
// \s+(?!\S) stop at its end. Thread-safe: one instance may serve concurrent calls.
class PreTokenizer {
 public:
  explicit PreTokenizer(const std::vector<std::string>& regexes);  // sluice::Error on bad regex
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // Appends the [begin, end) byte ranges of the pieces of `text`, which must be valid UTF-8
  // (callers repair it first: see utf8.h). Empty pieces are never produced.
  void split(std::string_view text, std::vector<std::pair<size_t, size_t>>& pieces) const;
  std::vector<std::string> split(std::string_view text) const;  // convenience for tests

 private:
  struct Compiled;
  std::vector<std::unique_ptr<Compiled>> regexes_;
};

}  // namespace sluice::text
