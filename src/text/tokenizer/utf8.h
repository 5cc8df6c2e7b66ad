// UTF-8 helpers the tokenizers share: decoding one code point, encoding one, and the two repair
// policies — per-byte replacement (what llama.cpp applies to tokenizer input) and maximal-subpart
// replacement (what Python and Rust's from_utf8_lossy apply to decoded output). Knows nothing of
// tokens or vocabularies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::text {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Appends the UTF-8 encoding of `cp` (must be <= 0x10FFFF and not a surrogate).
void append_utf8(std::string& out, char32_t cp);

// Decodes the well-formed sequence starting at `text[pos]` (no overlong forms, surrogates or
// values above U+10FFFF). Returns its length in bytes and sets `cp`; 0 when it is not
// well-formed (then `cp` is unspecified).
size_t decode_utf8(std::string_view text, size_t pos, char32_t& cp);

// Input repair as llama.cpp's tokenizer does it: every byte that does not start a well-formed
// sequence becomes one U+FFFD and decoding resumes at the next byte. Unlike llama.cpp, overlong
// forms, surrogates and values above U+10FFFF count as invalid too (it would pass them on or
// abort), so the result is always well-formed.
std::string repair_utf8_per_byte(std::string_view text);

// Output repair as Python's errors="replace" and Rust's String::from_utf8_lossy do it: each
// maximal ill-formed subpart (e.g. a truncated 3-byte sequence) becomes one U+FFFD.
std::string repair_utf8_lossy(std::string_view text);

bool is_valid_utf8(std::string_view text);

// Length of the longest prefix of `text` that does not end inside a sequence that could still
// complete: bytes after it are the start of a well-formed sequence that is merely cut short.
size_t utf8_complete_prefix(std::string_view text);

}  // namespace sluice::text
