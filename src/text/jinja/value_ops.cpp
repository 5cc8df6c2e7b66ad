// Python-faithful operators and access for jinja values. Integer division and modulo round
// toward negative infinity as in Python; `+` and `*` work on strings and lists; messages are
// CPython's because a template that fails in Python must fail here with the same words.
#include "text/jinja/value_ops.h"

#include <cmath>

#include "core/error.h"
#include "text/jinja/methods.h"
#include "text/jinja/pystring.h"
#include "text/jinja/utf8.h"

namespace sluice::jinja {

void fail_undefined(const Value& v) {
  fail(v.str());
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

namespace {

[[noreturn]] void unsupported(std::string_view op, const Value& a, const Value& b) {
  fail("unsupported operand type(s) for ", op, ": '", a.type_name(), "' and '", b.type_name(), "'");
}

Value repeat(const Value& seq, int64_t n) {
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value::string(std::move(out));
  }
  ValueList out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return Value::list(std::move(out), seq.seq_kind());
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

Value arithmetic(std::string_view op, const Value& a, const Value& b) {
  bool floats = a.is_float() || b.is_float();
  if (op == "+")
    return floats ? Value::number(a.as_float() + b.as_float())
                  : Value::integer(a.as_int() + b.as_int());
  if (op == "-")
    return floats ? Value::number(a.as_float() - b.as_float())
                  : Value::integer(a.as_int() - b.as_int());
  if (op == "*")
    return floats ? Value::number(a.as_float() * b.as_float())
                  : Value::integer(a.as_int() * b.as_int());
  if (op == "/") {
    if (b.as_float() == 0) fail(floats ? "float division by zero" : "division by zero");
    return Value::number(a.as_float() / b.as_float());
  }
  if (op == "//" || op == "%") {
    if (b.as_float() == 0) {
      if (floats) fail(op == "%" ? "float modulo" : "float floor division by zero");
      fail("integer division or modulo by zero");
    }
    if (!floats) {
      int64_t q = floor_div(a.as_int(), b.as_int());
      return Value::integer(op == "//" ? q : a.as_int() - q * b.as_int());
    }
    double x = a.as_float(), y = b.as_float();
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    if (op == "%") return Value::number(m);
    // CPython's float_floor_div: exact quotient of (x - mod) / y, rounded to the nearest integer.
    double div = (x - m) / y;
    double floored = std::floor(div);
    if (div - floored > 0.5) floored += 1.0;
    return Value::number(div != 0 ? floored : std::copysign(0.0, x / y));
  }
  // **
  if (!floats && b.as_int() >= 0) {
    int64_t r = 1;
    for (int64_t i = 0; i < b.as_int(); ++i) r *= a.as_int();
    return Value::integer(r);
  }
  return Value::number(std::pow(a.as_float(), b.as_float()));
}

}  // namespace

Value binary_op(std::string_view op, const Value& a, const Value& b) {
  if (op == "~") return Value::string(a.to_str() + b.to_str());
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      if (a.is_markup() || b.is_markup()) {
        return Value::markup((a.is_markup() ? a.str() : html_escape(a.str())) +
                             (b.is_markup() ? b.str() : html_escape(b.str())));
      }
      return Value::string(a.str() + b.str());
    }
    if (a.is_string()) fail("can only concatenate str (not \"", b.type_name(), "\") to str");
    if (a.is_list() && b.is_list() && a.seq_kind() == b.seq_kind() &&
        a.seq_kind() != SeqKind::Generator) {
      ValueList out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return Value::list(std::move(out), a.seq_kind());
    }
    if (a.is_list() && a.seq_kind() != SeqKind::Generator)
      fail("can only concatenate ", a.type_name(), " (not \"", b.type_name(), "\") to ",
           a.type_name());
    unsupported("+", a, b);
  }
  if (op == "*") {
    bool a_seq = a.is_string() || (a.is_list() && a.seq_kind() != SeqKind::Generator);
    bool b_seq = b.is_string() || (b.is_list() && b.seq_kind() != SeqKind::Generator);
    if (a_seq && (b.is_int() || b.is_bool())) return repeat(a, b.as_int());
    if (b_seq && (a.is_int() || a.is_bool())) return repeat(b, a.as_int());
    if (a_seq && b.is_number())
      fail("can't multiply sequence by non-int of type '", b.type_name(), "'");
    unsupported("*", a, b);
  }
  if (op == "%" && a.is_string()) return Value::string(percent_format(a.str(), b));
  unsupported(op == "**" ? "** or pow()" : op, a, b);
}

Value negate(const Value& a) {
  if (a.is_undefined()) fail_undefined(a);
  if (a.is_float()) return Value::number(-a.as_float());
  if (a.is_number()) return Value::integer(-a.as_int());
  fail("bad operand type for unary -: '", a.type_name(), "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::Undefined:
      return false;
    case Kind::String:
      if (!item.is_string())
        fail("'in <string>' requires string as left operand, not ", item.type_name());
      return container.str().find(item.str()) != std::string::npos;
    case Kind::List:
      for (const Value& v : container.items()) {
        if (values_equal(v, item)) return true;
      }
      return false;
    case Kind::Dict:
      if (container.is_namespace()) break;
      return container.dict_ref().find(item) != nullptr;
    default:
      break;
  }
  fail("argument of type '", container.type_name(), "' is not iterable");
}

ValueList iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      return {};
    case Kind::List:
      return v.items();
    case Kind::Dict: {
      if (v.is_namespace()) break;
      ValueList keys;
      for (const auto& item : v.dict_ref().items) keys.push_back(item.first);
      return keys;
    }
    case Kind::String: {
      ValueList chars;
      for (char32_t c : utf8_decode(v.str()))
        chars.push_back(Value::string(utf8_encode(std::u32string(1, c))));
      return chars;
    }
    default:
      break;
  }
  fail("'", v.type_name(), "' object is not iterable");
}

int64_t length(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      return 0;
    case Kind::String:
      return static_cast<int64_t>(utf8_length(v.str()));
    case Kind::List:
      if (v.seq_kind() == SeqKind::Generator) break;
      return static_cast<int64_t>(v.items().size());
    case Kind::Dict:
      if (v.is_namespace()) break;
      return static_cast<int64_t>(v.dict_ref().items.size());
    default:
      break;
  }
  fail("object of type '", v.type_name(), "' has no len()");
}

static std::string type_repr_for_attr(const Value& obj) {
  if (obj.is_namespace()) return "jinja2.utils.Namespace object";
  return object_type_repr(obj);
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (std::optional<Value> method = find_method(obj, name)) return *method;
  if (obj.is_dict()) {
    if (const Value* v = obj.dict_ref().find(std::string_view(name))) return *v;
  }
  return Value::undefined("'" + type_repr_for_attr(obj) + "' has no attribute '" + name + "'");
}

static bool normalize_index(int64_t& i, size_t size) {
  if (i < 0) i += static_cast<int64_t>(size);
  return i >= 0 && i < static_cast<int64_t>(size);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict() && !obj.is_namespace()) {
    if (const Value* v = obj.dict_ref().find(key)) return *v;
  } else if ((obj.is_list() && obj.seq_kind() != SeqKind::Generator) || obj.is_string()) {
    if (key.is_int() || key.is_bool()) {
      int64_t i = key.as_int();
      if (obj.is_list()) {
        if (normalize_index(i, obj.items().size())) return obj.items()[static_cast<size_t>(i)];
      } else {
        std::u32string cps = utf8_decode(obj.str());
        if (normalize_index(i, cps.size()))
          return Value::string(utf8_encode(cps.substr(static_cast<size_t>(i), 1)));
      }
    }
  }
  if (key.is_string()) return get_attr(obj, key.str());
  return Value::undefined(object_type_repr(obj) + " has no element " + key.repr());
}

namespace {

// Python's slice.indices(): clamp start/stop for the step's direction.
void slice_bounds(int64_t size, const Value& start, const Value& stop, int64_t step, int64_t& lo,
                  int64_t& hi) {
  auto clamp = [&](const Value& v, int64_t dflt) {
    if (v.is_undefined() || v.is_none()) return dflt;
    int64_t i = v.as_int();
    if (i < 0) {
      i += size;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= size) {
      i = step < 0 ? size - 1 : size;
    }
    return i;
  };
  lo = clamp(start, step < 0 ? size - 1 : 0);
  hi = clamp(stop, step < 0 ? -1 : size);
}

}  // namespace

Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step_value) {
  if (obj.is_undefined()) fail_undefined(obj);
  int64_t step = step_value.is_undefined() || step_value.is_none() ? 1 : step_value.as_int();
  if (step == 0) fail("slice step cannot be zero");
  for (const Value* v : {&start, &stop, &step_value}) {
    if (!v->is_undefined() && !v->is_none() && !v->is_int() && !v->is_bool())
      fail("slice indices must be integers or None or have an __index__ method");
  }
  auto pick = [&](size_t size, auto&& take) {
    int64_t lo, hi;
    slice_bounds(static_cast<int64_t>(size), start, stop, step, lo, hi);
    for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) take(static_cast<size_t>(i));
  };
  if (obj.is_string()) {
    std::u32string cps = utf8_decode(obj.str()), out;
    pick(cps.size(), [&](size_t i) { out.push_back(cps[i]); });
    return Value::string(utf8_encode(out));
  }
  if (obj.is_list() && obj.seq_kind() != SeqKind::Generator) {
    ValueList out;
    pick(obj.items().size(), [&](size_t i) { out.push_back(obj.items()[i]); });
    return Value::list(std::move(out), obj.seq_kind());
  }
  return Value::undefined(object_type_repr(obj) + " has no element slice(" + start.repr() + ", " +
                          stop.repr() + ", " + step_value.repr() + ")");
}

}  // namespace sluice::jinja
