// Parser: tokens → statement tree, following jinja2's grammar and precedence (condexpr < or <
// and < not < compare < +/- < ~ < * / // % < ** < unary < postfix/filters), including its
// quirks (left-associative **, tests taking one bare argument). Syntax errors carry jinja2's
// messages. Knows which filter and test names exist only through the callbacks it is given.
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"

namespace sluice::jinja {

struct ParseOptions {
  std::function<bool(std::string_view)> is_filter;  // known filter names
  std::function<bool(std::string_view)> is_test;    // known test names
};

StmtList parse(const std::vector<Token>& tokens, const ParseOptions& options);

}  // namespace sluice::jinja
