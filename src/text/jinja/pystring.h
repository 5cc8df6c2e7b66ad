// Python str semantics on UTF-8 strings: strip/split/title/… with CPython's whitespace and
// splitting rules, `%` formatting and str.format(). Shared by the filters and the string
// methods so both behave exactly as the same Python call would.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/value.h"

namespace sluice::jinja {

// str.strip/lstrip/rstrip; chars absent → Unicode whitespace.
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                     bool right);
// str.split/rsplit; sep absent → runs of whitespace; maxsplit < 0 → no limit.
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep,
                                  int64_t maxsplit);
std::vector<std::string> py_rsplit(std::string_view s, const std::optional<std::string>& sep,
                                   int64_t maxsplit);
std::vector<std::string> py_splitlines(std::string_view s, bool keepends);
std::string py_replace(std::string_view s, std::string_view old, std::string_view repl,
                       int64_t count);
int64_t py_count(std::string_view s, std::string_view sub);
// Code-point index of sub in s, or -1.
int64_t py_find(std::string_view s, std::string_view sub, bool reverse);
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_title(std::string_view s);
std::string py_capitalize(std::string_view s);
std::string py_center(std::string_view s, int64_t width, std::string_view fill = " ");
bool py_is(std::string_view s,
           std::string_view what);  // "digit", "alpha", "alnum", "space", "upper", "lower"

// printf-style `fmt % args` (%s %r %d %i %f %x %% with flags, width, precision).
std::string percent_format(std::string_view fmt, const Value& args);
// str.format(*args, **kwargs) with {}, {0}, {name}, {name[key]}, {x.attr} and format specs.
std::string str_format(std::string_view fmt, const CallArgs& args);

}  // namespace sluice::jinja
