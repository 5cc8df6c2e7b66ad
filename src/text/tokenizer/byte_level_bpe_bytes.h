// The GPT-2 byte <-> character mapping of byte-level BPE: every byte value stands for one
// printable code point, so any byte string becomes a vocabulary-friendly text and back. Owns
// only that bijection; knows nothing of merges, vocabularies or pre-tokenization.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::text {

// The code point byte `b` is written as: printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ')
// stand for themselves, the other 68 bytes take U+0100 upwards in byte order.
char32_t byte_to_codepoint(uint8_t b);

// The byte a code point stands for; nullopt for code points outside the mapping.
std::optional<uint8_t> codepoint_to_byte(char32_t cp);

// Appends the byte-level text of `bytes` (each byte its code point in UTF-8).
void append_byte_level(std::string& out, std::string_view bytes);

// Maps byte-level text back to bytes. Characters outside the mapping are copied unchanged
// (their UTF-8 bytes), so a malformed vocabulary entry degrades instead of failing.
std::string byte_level_to_bytes(std::string_view text);

}  // namespace sluice::text
