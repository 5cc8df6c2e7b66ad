// TokenizerSpec: everything a tokenizer is built from, independent of where it came from. The
// GGUF adapter (runtime/, from tokenizer.ggml.* metadata) and the Hugging Face adapter
// (text/tokenizer/hf_tokenizer_json, from tokenizer.json + tokenizer_config.json) both fill it;
// the same tokenizer from either source must produce the same spec-level behaviour.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sluice::text {

using TokenId = int32_t;

// tokenizer.ggml.model: which segmentation algorithm.
enum class TokenizerKind {
  BytePairByteLevel,  // "gpt2": GPT-2 style byte-level BPE, regex pre-tokenizer, merges by rank
  SentencePiece,      // "llama": SentencePiece BPE over scores, U+2581 spaces, <0xNN> byte fallback
  WordPiece,          // "bert"
  Unigram,            // "t5"
};

// Token types exactly as GGUF's tokenizer.ggml.token_type numbers them.
enum class TokenType : int32_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

// A Unicode normalization applied to the plain text before pre-tokenization.
enum class UnicodeNormalization { None, NFC, NFD, NFKC, NFKD };

// How added tokens that overlap in the text are resolved. They differ only on overlaps such as
// "ab" and "bcd" in "abcd" (llama.cpp: "a", "bcd"; Hugging Face: "ab", "cd").
enum class AddedTokenMatch {
  LongestTokenFirst,  // llama.cpp's tokenizer_st_partition: each token, longest first, splits
                      // every remaining fragment at all its occurrences (GGUF)
  LeftmostLongest,    // tokenizers' AddedVocabulary: one scan, the longest token starting at
                      // the leftmost position wins (tokenizer.json)
};

// A Hugging Face added token marked `normalized: true` under a tokenizer.json normalizer.
// tokenizers matches it in the *normalized* text of each piece between the other added
// tokens, by the normalizer's output for its content: under llama2's legacy Prepend("▁") +
// Replace(" " → "▁"), "<s>" is matched as "▁<s>", so only at the start of a piece or right
// after a space, which it absorbs. When `form` differs from the content, tokenizers also
// decodes the token as `form` (" <s>") and, no longer finding it among the special texts,
// never skips it.
struct NormalizedAddedToken {
  TokenId id = -1;
  std::string form;
};

struct TokenizerSpec {
  TokenizerKind kind = TokenizerKind::BytePairByteLevel;
  std::string pre_name;                  // tokenizer.ggml.pre as given ("llama-bpe", "qwen2", …)
  std::vector<std::string> pre_regexes;  // pre-tokenizer split patterns, applied in order
  std::vector<std::string> tokens;       // [n_vocab] token text as stored (byte-level chars / ▁)
  std::vector<float> scores;             // [n_vocab] or empty
  std::vector<TokenType> types;          // [n_vocab]
  std::vector<std::string> merges;       // BPE merges "a b", rank = index

  std::optional<TokenId> bos, eos, eot, eom, unk, pad, sep, mask;
  std::vector<TokenId> eog;  // every end-of-generation id (eos, eot, eom, …)
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;  // SentencePiece add_dummy_prefix
  bool remove_extra_whitespaces = false;
  bool escape_whitespaces = true;  // SentencePiece: spaces become U+2581
  bool clean_spaces = false;       // decode: clean_up_tokenization_spaces
  bool ignore_merges = false;      // BPE: a whole pre-token found in the vocab wins (llama3)
  std::string chat_template;       // tokenizer.chat_template, when present

  // Hugging Face normalizers (tokenizer.json `normalizer`, e.g. Qwen3's NFC) rewrite the plain
  // text between added tokens before pre-tokenization; ids for decomposed input only match
  // with the same normalization. llama.cpp applies none for BPE GGUFs, so GGUF specs keep None.
  UnicodeNormalization normalization = UnicodeNormalization::None;

  // Special tokens that swallow ASCII whitespace next to them when split out of the text
  // (Hugging Face added_tokens lstrip/rstrip; llama.cpp sets them by model name, e.g. phi-3's
  // rstrip and jina's <mask> lstrip). Empty for most tokenizers.
  std::vector<TokenId> lstrip_ids;
  std::vector<TokenId> rstrip_ids;

  AddedTokenMatch added_token_match = AddedTokenMatch::LongestTokenFirst;
  // Added tokens matched in normalized text (see NormalizedAddedToken); always empty for GGUF.
  // They are left out of the raw-text match, which runs first, as in tokenizers.
  std::vector<NormalizedAddedToken> normalized_added;
};

}  // namespace sluice::text
