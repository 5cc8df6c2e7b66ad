// UTF-8 helpers for Python-faithful string operations: Python indexes, slices and measures
// strings in code points, so len(), s[i] and s[a:b] decode first. Invalid bytes decode as
// U+FFFD rather than failing, since template input is already validated JSON or template text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sluice::jinja {

std::u32string utf8_decode(std::string_view s);
std::string utf8_encode(std::u32string_view s);
void utf8_append(std::string& out, char32_t c);
size_t utf8_length(std::string_view s);

// Python's str.isspace() for one code point (Unicode White_Space plus the ASCII separators).
bool is_py_space(char32_t c);
// Python's simple case mappings for the scripts templates meet (Latin, Greek, Cyrillic).
char32_t py_lower(char32_t c);
char32_t py_upper(char32_t c);
bool is_py_alpha_cased(char32_t c);  // has a case (used by title() and capitalize())

}  // namespace sluice::jinja
