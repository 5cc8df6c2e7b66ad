// Value construction, Python truthiness, str()/repr() and comparisons. Output must match
// CPython byte for byte, because templates print lists, dicts and floats straight into prompts.
#include "text/jinja/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "text/jinja/utf8.h"

namespace sluice::jinja {

Value Value::undefined(std::string hint) {
  Value v;
  v.s_ = std::move(hint);
  return v;
}
Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.i_ = b ? 1 : 0;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.i_ = i;
  return v;
}
Value Value::number(double f) {
  Value v;
  v.kind_ = Kind::Float;
  v.f_ = f;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::String;
  v.s_ = std::move(s);
  return v;
}
Value Value::markup(std::string s) {
  Value v = string(std::move(s));
  v.markup_ = true;
  return v;
}
Value Value::list(ValueList items, SeqKind seq) {
  Value v;
  v.kind_ = Kind::List;
  v.seq_ = seq;
  v.list_ = std::make_shared<ValueList>(std::move(items));
  return v;
}
Value Value::dict(std::shared_ptr<Dict> d) {
  Value v;
  v.kind_ = Kind::Dict;
  v.dict_ = d ? std::move(d) : std::make_shared<Dict>();
  return v;
}
Value Value::function(std::string name, NativeFunction fn) {
  Value v;
  v.kind_ = Kind::Function;
  v.fn_ = std::make_shared<Function>(Function{std::move(name), std::move(fn)});
  return v;
}

double Value::as_float() const {
  return kind_ == Kind::Float ? f_ : static_cast<double>(i_);
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
    case Kind::Int:
      return i_ != 0;
    case Kind::Float:
      return f_ != 0.0;
    case Kind::String:
      return !s_.empty();
    case Kind::List:
      return seq_ == SeqKind::Generator || !list_->empty();
    case Kind::Dict:
      return dict_->is_namespace || !dict_->items.empty();
    case Kind::Function:
      return true;
  }
  return false;
}

std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  if (f == 0) return std::signbit(f) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // "-d.ddde+XX"
  bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  size_t epos = sci.find('e');
  int exponent = std::stoi(sci.substr(epos + 1));
  std::string digits;
  for (size_t i = 0; i < epos; ++i) {
    if (sci[i] != '.') digits.push_back(sci[i]);
  }
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + ebuf;
  }
  if (exponent >= 0) {
    size_t int_digits = static_cast<size_t>(exponent) + 1;
    if (digits.size() <= int_digits)
      return out + digits + std::string(int_digits - digits.size(), '0') + ".0";
    return out + digits.substr(0, int_digits) + "." + digits.substr(int_digits);
  }
  return out + "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
}

// CPython's str.isprintable() is false for separators and format characters as well as
// controls; these are the ones real text carries.
static bool py_printable(char32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F)) return false;
  if ((c >= 0x205F && c <= 0x2064) || (c >= 0x2066 && c <= 0x206F) || c == 0x3000) return false;
  if (c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB) || (c >= 0xD800 && c <= 0xF8FF)) return false;
  if ((c >= 0x600 && c <= 0x605) || c == 0x61C || c == 0x6DD || c == 0x70F || c == 0x180E)
    return false;
  return true;
}

std::string string_repr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : utf8_decode(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!py_printable(c)) {
      char buf[16];
      if (c < 0x100) {
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      } else if (c < 0x10000) {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      } else {
        std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
      }
      out += buf;
    } else {
      utf8_append(out, c);
    }
  }
  out.push_back(quote);
  return out;
}

std::string Value::to_str() const {
  switch (kind_) {
    case Kind::Undefined:
      return "";
    case Kind::String:
      return s_;
    default:
      return repr();
  }
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "None";
    case Kind::Bool:
      return i_ ? "True" : "False";
    case Kind::Int:
      return std::to_string(i_);
    case Kind::Float:
      return float_repr(f_);
    case Kind::String:
      return string_repr(s_);
    case Kind::List: {
      if (seq_ == SeqKind::Generator) return "<generator object sync_do_map at 0x7f0000000000>";
      bool tuple = seq_ == SeqKind::Tuple;
      std::string out = tuple ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i) out += ", ";
        out += (*list_)[i].repr();
      }
      if (tuple && list_->size() == 1) out += ",";
      return out + (tuple ? ")" : "]");
    }
    case Kind::Dict: {
      std::string out = dict_->is_namespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, v] : dict_->items) {
        if (!first) out += ", ";
        first = false;
        out += k.repr() + ": " + v.repr();
      }
      return out + (dict_->is_namespace ? "}>" : "}");
    }
    case Kind::Function:
      return "<function " + fn_->name + ">";
  }
  return "";
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return "str";
    case Kind::List:
      return seq_ == SeqKind::Tuple ? "tuple" : seq_ == SeqKind::Generator ? "generator" : "list";
    case Kind::Dict:
      return dict_->is_namespace ? "Namespace" : "dict";
    case Kind::Function:
      return "function";
  }
  return "object";
}

std::string object_type_repr(const Value& v) {
  if (v.is_none()) return "None";
  return v.type_name() + " object";
}

const Value* Dict::find(const Value& key) const {
  for (const auto& item : items) {
    if (values_equal(item.first, key)) return &item.second;
  }
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& item : items) {
    if (item.first.is_string() && item.first.str() == key) return &item.second;
  }
  return nullptr;
}

void Dict::set(const Value& key, Value value) {
  for (auto& item : items) {
    if (values_equal(item.first, key)) {
      item.second = std::move(value);
      return;
    }
  }
  items.emplace_back(key, std::move(value));
}

Value CallArgs::get(size_t index, std::string_view name) const {
  for (const auto& [k, v] : keyword) {
    if (k == name) return v;
  }
  if (index < positional.size()) return positional[index];
  return Value();
}

bool CallArgs::has(size_t index, std::string_view name) const {
  for (const auto& kv : keyword) {
    if (kv.first == name) return true;
  }
  return index < positional.size();
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None:
      return true;
    case Kind::String:
      return a.str() == b.str();
    case Kind::List: {
      if (a.seq_kind() != b.seq_kind()) return false;
      if (a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i) {
        if (!values_equal(a.items()[i], b.items()[i])) return false;
      }
      return true;
    }
    case Kind::Dict: {
      if (a.dict_ptr() == b.dict_ptr()) return true;
      if (a.is_namespace() || b.is_namespace()) return false;
      if (a.dict_ref().items.size() != b.dict_ref().items.size()) return false;
      for (const auto& [k, v] : a.dict_ref().items) {
        const Value* other = b.dict_ref().find(k);
        if (!other || !values_equal(v, *other)) return false;
      }
      return true;
    }
    case Kind::Function:
      return &a.function_ref() == &b.function_ref();
    default:
      return false;
  }
}

bool value_less(const Value& a, const Value& b, std::string_view op) {
  if (a.is_undefined()) fail(a.str());
  if (b.is_undefined()) fail(b.str());
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() < b.as_float();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 order = code point order
  if (a.is_list() && b.is_list() && a.seq_kind() == b.seq_kind()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!values_equal(x[i], y[i])) return value_less(x[i], y[i], op);
    }
    return x.size() < y.size();
  }
  fail("'", op, "' not supported between instances of '", a.type_name(), "' and '", b.type_name(),
       "'");
}

}  // namespace sluice::jinja
