// SegmentModel: the part of a tokenizer that differs per kind — how a plain-text fragment (no
// special tokens left in it) becomes ids, and how one id becomes bytes. Tokenizer (tokenizer.h)
// does everything shared around it. One implementation per kind: byte-level BPE, SentencePiece,
// WordPiece, Unigram; make_segment_model picks by TokenizerSpec::kind.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer/tokenizer_spec.h"

namespace sluice::text {

// Where a fragment sits in the input; SentencePiece's dummy-prefix rule depends on it.
struct FragmentContext {
  bool at_text_start = false;  // the first fragment of the whole input
  bool after_special = false;  // follows a special token that was split out
};

class SegmentModel {
 public:
  virtual ~SegmentModel() = default;
  // Appends the ids of `fragment` to `out`.
  virtual void encode_fragment(std::string_view fragment, const FragmentContext& context,
                               std::vector<TokenId>& out) const = 0;
  // encode_fragment in two steps, for matching Hugging Face `normalized` added tokens in
  // between: the fragment as the tokenizer.json normalizer leaves it (SentencePiece: dummy
  // prefix, spaces as U+2581), then the ids of a piece of such text. Defaults: the fragment
  // unchanged, and encode_fragment (the kinds whose context does not matter).
  virtual std::string normalize_fragment(std::string_view fragment,
                                         const FragmentContext& context) const {
    (void)context;
    return std::string(fragment);
  }
  virtual void encode_normalized(std::string_view normalized, std::vector<TokenId>& out) const {
    encode_fragment(normalized, FragmentContext{}, out);
  }
  // The bytes token `id` stands for in decoded text (byte-level chars mapped back to bytes,
  // U+2581 to space, <0xNN> to the byte). Special tokens give their text.
  virtual std::string token_to_bytes(TokenId id) const = 0;
  // The bytes of a normalized added token's form (tokenizer_spec.h NormalizedAddedToken), which
  // Hugging Face decodes like an ordinary piece. Default: the form as written.
  virtual std::string form_to_bytes(std::string_view form) const { return std::string(form); }
  // Adjusts a whole decoded text for this kind (e.g. SentencePiece drops the dummy-prefix space
  // at the start). Default: unchanged.
  virtual void finish_decode(std::string& text, bool at_text_start) const {
    (void)text;
    (void)at_text_start;
  }
};

// Throws sluice::Error for a kind that is not supported, naming it.
std::unique_ptr<SegmentModel> make_segment_model(const TokenizerSpec& spec);

// One factory per kind, each in its own file.
std::unique_ptr<SegmentModel> make_byte_level_bpe(const TokenizerSpec& spec);
std::unique_ptr<SegmentModel> make_sentencepiece(const TokenizerSpec& spec);
std::unique_ptr<SegmentModel> make_wordpiece(const TokenizerSpec& spec);
std::unique_ptr<SegmentModel> make_unigram(const TokenizerSpec& spec);

}  // namespace sluice::text
