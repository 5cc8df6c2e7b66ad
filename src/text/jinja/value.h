// jinja::Value: the dynamic values a chat template computes with, behaving like the Python
// objects jinja2 hands around — int/float/bool arithmetic with Python's rules, str/repr output
// (`[1, 'a']`, `{'k': None}`, `1.0`), ordered dicts, undefined values that remember why they
// are undefined. Knows nothing of templates' syntax; the interpreter gives values meaning.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::jinja {

class Value;
struct CallArgs;
using ValueList = std::vector<Value>;
using NativeFunction = std::function<Value(CallArgs&)>;

enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Function };

// What a List value is in Python terms: its printing and JSON behaviour differ.
enum class SeqKind : uint8_t { List, Tuple, Generator };

// Dicts keep insertion order (Python 3.7+); lookups are linear because template dicts are small.
struct Dict {
  std::vector<std::pair<Value, Value>> items;
  bool is_namespace = false;  // jinja2's namespace(): the one object `set a.b = …` may change

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(const Value& key, Value value);
};

struct Function {
  std::string name;  // for messages ("macro 'x'", "builtin method")
  NativeFunction call;
};

class Value {
 public:
  Value() = default;  // undefined
  static Value undefined(std::string hint = {});
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double f);
  static Value string(std::string s);
  // jinja2's Markup (from `|safe` or `|escape`): adding a plain str to it HTML-escapes the str.
  static Value markup(std::string s);
  static Value list(ValueList items = {}, SeqKind seq = SeqKind::List);
  static Value dict(std::shared_ptr<Dict> d = nullptr);
  static Value function(std::string name, NativeFunction fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const {
    return kind_ == Kind::Int;
  }  // not bool (Python: isinstance(True, int) aside)
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const {
    return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool;
  }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_markup() const { return kind_ == Kind::String && markup_; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_function() const { return kind_ == Kind::Function; }
  bool is_namespace() const { return kind_ == Kind::Dict && dict_->is_namespace; }
  SeqKind seq_kind() const { return seq_; }

  bool as_bool() const { return i_ != 0; }
  int64_t as_int() const { return i_; }          // Int and Bool
  double as_float() const;                       // any number
  const std::string& str() const { return s_; }  // String; the hint of an Undefined
  const ValueList& items() const { return *list_; }
  ValueList& mutable_items() { return *list_; }
  const Dict& dict_ref() const { return *dict_; }
  Dict& mutable_dict() { return *dict_; }
  const std::shared_ptr<Dict>& dict_ptr() const { return dict_; }
  const Function& function_ref() const { return *fn_; }

  // Python truthiness: empty containers, 0, '' and None are false; generators are always true.
  bool truthy() const;
  // Python str(): what `{{ x }}` prints (undefined prints nothing).
  std::string to_str() const;
  // Python repr(): how the value prints inside a list or dict.
  std::string repr() const;
  // Python type name for messages: "int", "str", "dict", "NoneType", "list", ...
  std::string type_name() const;

 private:
  Kind kind_ = Kind::Undefined;
  SeqKind seq_ = SeqKind::List;
  bool markup_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<ValueList> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Function> fn_;
};

// Arguments of a call: positional then keyword, as written.
struct CallArgs {
  ValueList positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // The argument named `name` or at `index` (whichever is present), or undefined.
  Value get(size_t index, std::string_view name) const;
  bool has(size_t index, std::string_view name) const;
};

// Python ==: 1 == 1.0 == True, lists and dicts element-wise, undefined equals undefined.
bool values_equal(const Value& a, const Value& b);
// Python <: numbers, strings (by code point), lists lexicographically; otherwise a TypeError
// message like "'<' not supported between instances of 'int' and 'str'" (`op` names the operator).
bool value_less(const Value& a, const Value& b, std::string_view op = "<");

// Python float repr: shortest round-trip digits, "1.0", "1e-05", "1e+16", "inf", "nan".
std::string float_repr(double f);
// Python repr of a str: single quotes unless it holds ' and no ", escapes for non-printables.
std::string string_repr(std::string_view s);
// jinja2's object_type_repr for undefined messages: "dict object", "None", "str object".
std::string object_type_repr(const Value& v);

}  // namespace sluice::jinja
