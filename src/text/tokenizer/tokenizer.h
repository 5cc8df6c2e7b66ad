// Tokenizer: text <-> token ids for every tokenizer kind. It owns what all kinds share —
// splitting out special tokens (control ones only when parse_special is on), BOS/EOS, token types,
// decoding and the streaming decoder — and hands plain-text fragments to the kind's
// SegmentModel (segment_model.h). Knows nothing of files: it is built from a TokenizerSpec.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer/tokenizer_spec.h"

namespace sluice::text {

class SegmentModel;

struct EncodeOptions {
  // Recognise control (and unknown-type) token texts inside the input. User-defined (added,
  // non-special) tokens are recognised either way, as llama.cpp and Hugging Face do.
  bool parse_special = false;
  bool add_special = false;  // add BOS/EOS as the spec's add_bos/add_eos say
};

struct DecodeOptions {
  // Drop control and unknown-type tokens (BOS, EOS, <|im_start|> …) from the text, as
  // llama.cpp's detokenize does without `special` — except a Hugging Face `normalized` added
  // token decoded as its normalized form, which tokenizers never drops (llama2's legacy <s>).
  bool skip_special = false;
};

class Tokenizer {
 public:
  explicit Tokenizer(TokenizerSpec spec);  // validates the spec; throws sluice::Error
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  std::vector<TokenId> encode(std::string_view text, const EncodeOptions& options = {}) const;
  std::string decode(std::span<const TokenId> ids, const DecodeOptions& options = {}) const;
  // The raw bytes one token stands for (may be part of a UTF-8 sequence).
  std::string token_piece(TokenId id, const DecodeOptions& options = {}) const;
  // token_piece with the kind's start-of-text adjustment (SentencePiece drops the dummy-prefix
  // space) applied when the piece is the first text of a sequence: what StreamingDecoder emits.
  std::string decode_piece(TokenId id, bool at_text_start, const DecodeOptions& options = {}) const;

  const TokenizerSpec& spec() const;
  size_t n_vocab() const;
  bool is_control(TokenId id) const;
  bool is_end_of_generation(TokenId id) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Turns a stream of ids into text without ever emitting a partial UTF-8 sequence: bytes of an
// incomplete character are held back until the character completes (or flush() is called).
// Output is always well-formed: bytes that can no longer complete become U+FFFD (one per
// maximal ill-formed subpart, as Python and Rust do). Tokenizer::decode's clean_spaces pass
// needs the following text, so streams do not apply it (nor does llama.cpp's token_to_piece).
class StreamingDecoder {
 public:
  // at_text_start: the first token begins the text (SentencePiece then drops its leading
  // space); false when continuing text that came before, as generation after a prompt does.
  explicit StreamingDecoder(const Tokenizer& tokenizer, DecodeOptions options = {},
                            bool at_text_start = true);
  std::string push(TokenId id);  // the text that became complete with this token
  std::string flush();           // whatever is left, invalid bytes replaced by U+FFFD

 private:
  const Tokenizer* tokenizer_;
  DecodeOptions options_;
  std::string pending_;  // bytes of an incomplete UTF-8 sequence
  bool first_ = true;
};

}  // namespace sluice::text
