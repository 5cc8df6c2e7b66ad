// Lexer: template text → tokens, applying jinja2's whitespace rules as Hugging Face configures
// them (trim_blocks, lstrip_blocks, `-`/`+` modifiers, a single trailing newline dropped,
// newlines normalised to \n). Raw blocks and comments are resolved here; the parser never sees
// them. Knows no grammar beyond where tags begin and end.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::jinja {

enum class Tok : uint8_t {
  Data,        // literal template text, whitespace control already applied
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,
  String,  // text holds the decoded value
  Integer,
  Float,
  Op,  // text holds the operator: + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : |
  Eof,
};

struct Token {
  Tok type = Tok::Eof;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

// Throws sluice::Error with jinja2's message for unterminated tags, strings and comments.
std::vector<Token> tokenize(std::string_view source, const LexOptions& options = {});

}  // namespace sluice::jinja
