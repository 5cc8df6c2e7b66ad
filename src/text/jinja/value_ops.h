// Operations on values with Python's semantics and error messages, as jinja2 (in the immutable
// sandbox Hugging Face uses) performs them: arithmetic, membership, iteration, attribute and
// item access, slicing. Errors are sluice::Error carrying CPython's or jinja2's message text.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "text/jinja/value.h"

namespace sluice::jinja {

// a op b for op in + - * / // % ** ~.
Value binary_op(std::string_view op, const Value& a, const Value& b);
Value negate(const Value& a);
// `item in container` (Python's `in`); the error for non-containers is CPython's TypeError.
bool contains(const Value& container, const Value& item);
// The elements `for` walks: list items, dict keys, string characters; undefined gives none.
ValueList iterate(const Value& v);
// Python len(); TypeError "object of type 'int' has no len()" otherwise.
int64_t length(const Value& v);

// obj.name: Python attributes first (methods of str/dict/list), then items; an undefined with
// jinja2's hint when missing; unsafe (mutating) methods give an undefined that raises
// SecurityError's message when called.
Value get_attr(const Value& obj, const std::string& name);
// obj[key]: items first, then attributes for string keys.
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] for lists, tuples and strings; absent bounds are undefined values.
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// markupsafe's escape(): & < > " ' as HTML entities.
std::string html_escape(const std::string& s);

// Raises the UndefinedError an undefined value carries (attribute access, calls, arithmetic).
[[noreturn]] void fail_undefined(const Value& v);

}  // namespace sluice::jinja
