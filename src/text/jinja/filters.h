// jinja2's builtin filters and tests, with Hugging Face's `tojson` (json.dumps with
// ensure_ascii=False, sort_keys=False and its indent/separators arguments). Filters returning
// Python generators in jinja2 (map, select, items, …) return generator-kind lists so printing,
// truthiness, length and tojson fail or succeed exactly where Python's would.
#pragma once

#include <string_view>

#include "text/jinja/value.h"

namespace sluice::jinja {

bool is_filter(std::string_view name);
bool is_test(std::string_view name);
Value apply_filter(std::string_view name, const Value& value, CallArgs& args);
bool apply_test(std::string_view name, const Value& value, CallArgs& args);

}  // namespace sluice::jinja
