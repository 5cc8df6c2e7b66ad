// The builtin tests (`x is defined`, `x is string`, `x is divisibleby 3`, …) with jinja2's
// definitions, including its quirks: booleans are numbers but not integers, and an undefined
// value counts as a sequence and as iterable.
#include <functional>
#include <unordered_map>

#include "core/error.h"
#include "text/jinja/filters.h"
#include "text/jinja/pystring.h"
#include "text/jinja/value_ops.h"

namespace sluice::jinja {
namespace {

using TestFn = std::function<bool(const Value&, CallArgs&)>;

Value other(CallArgs& a) {
  if (a.positional.empty() && a.keyword.empty()) fail("missing required argument for test");
  return a.get(0, "b");
}

bool is_seq(const Value& v) {
  return v.is_undefined() || v.is_string() || (v.is_list() && v.seq_kind() != SeqKind::Generator) ||
         (v.is_dict() && !v.is_namespace());
}

TestFn compare(std::string_view op) {
  return [op](const Value& v, CallArgs& a) {
    Value b = other(a);
    if (op == "==") return values_equal(v, b);
    if (op == "!=") return !values_equal(v, b);
    if (op == "<") return value_less(v, b, op);
    if (op == ">") return value_less(b, v, op);
    if (op == "<=") return values_equal(v, b) || value_less(v, b, op);
    return values_equal(v, b) || value_less(b, v, op);
  };
}

int64_t int_mod(const Value& v, int64_t m) {
  if (!v.is_number()) binary_op("%", v, Value::integer(m));
  if (v.is_float()) return static_cast<int64_t>(binary_op("%", v, Value::integer(m)).as_float());
  return binary_op("%", v, Value::integer(m)).as_int();
}

const std::unordered_map<std::string_view, TestFn>& test_table() {
  static const std::unordered_map<std::string_view, TestFn> table = {
      {"defined", [](const Value& v, CallArgs&) { return !v.is_undefined(); }},
      {"undefined", [](const Value& v, CallArgs&) { return v.is_undefined(); }},
      {"none", [](const Value& v, CallArgs&) { return v.is_none(); }},
      {"boolean", [](const Value& v, CallArgs&) { return v.is_bool(); }},
      {"true", [](const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }},
      {"false", [](const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }},
      {"integer", [](const Value& v, CallArgs&) { return v.is_int(); }},
      {"float", [](const Value& v, CallArgs&) { return v.is_float(); }},
      {"number", [](const Value& v, CallArgs&) { return v.is_number(); }},
      {"string", [](const Value& v, CallArgs&) { return v.is_string(); }},
      {"mapping", [](const Value& v, CallArgs&) { return v.is_dict() && !v.is_namespace(); }},
      {"sequence", [](const Value& v, CallArgs&) { return is_seq(v); }},
      {"iterable", [](const Value& v, CallArgs&) { return is_seq(v) || v.is_list(); }},
      {"callable", [](const Value& v, CallArgs&) { return v.is_function(); }},
      {"odd", [](const Value& v, CallArgs&) { return int_mod(v, 2) == 1; }},
      {"even", [](const Value& v, CallArgs&) { return int_mod(v, 2) == 0; }},
      {"divisibleby",
       [](const Value& v, CallArgs& a) { return int_mod(v, other(a).as_int()) == 0; }},
      {"lower", [](const Value& v, CallArgs&) { return py_is(v.to_str(), "lower"); }},
      {"upper", [](const Value& v, CallArgs&) { return py_is(v.to_str(), "upper"); }},
      {"in", [](const Value& v, CallArgs& a) { return contains(other(a), v); }},
      {"sameas",
       [](const Value& v, CallArgs& a) {
         Value b = other(a);
         if (v.is_dict() && b.is_dict()) return v.dict_ptr() == b.dict_ptr();
         if (v.kind() != b.kind()) return false;
         return (v.is_none() || v.is_bool() || v.is_int() || v.is_string()) && values_equal(v, b);
       }},
      {"escaped", [](const Value&, CallArgs&) { return false; }},
      {"filter", [](const Value& v, CallArgs&) { return v.is_string() && is_filter(v.str()); }},
      {"test", [](const Value& v, CallArgs&) { return v.is_string() && is_test(v.str()); }},
      {"eq", compare("==")},
      {"equalto", compare("==")},
      {"==", compare("==")},
      {"ne", compare("!=")},
      {"!=", compare("!=")},
      {"lt", compare("<")},
      {"lessthan", compare("<")},
      {"<", compare("<")},
      {"le", compare("<=")},
      {"<=", compare("<=")},
      {"gt", compare(">")},
      {"greaterthan", compare(">")},
      {">", compare(">")},
      {"ge", compare(">=")},
      {">=", compare(">=")},
  };
  return table;
}

}  // namespace

bool is_test(std::string_view name) {
  return test_table().count(name) > 0;
}

bool apply_test(std::string_view name, const Value& value, CallArgs& args) {
  auto it = test_table().find(name);
  if (it == test_table().end()) fail("No test named '", name, "' found.");
  return it->second(value, args);
}

}  // namespace sluice::jinja
