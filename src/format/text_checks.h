// Small text helpers for validating names read from files: UTF-8 validity, and a printable,
// length-capped rendering of untrusted bytes for one-line error messages.
#pragma once

#include <string>
#include <string_view>

namespace sluice {

// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool is_valid_utf8(std::string_view text);

// `text` with control bytes (and, unless it is valid UTF-8, bytes >= 0x80) as \xNN, cut at
// `max_bytes` with "..." appended.
std::string printable(std::string_view text, size_t max_bytes = 80);

}  // namespace sluice
