// Bound str/dict/list methods. Each returns a Function value closing over its object, so
// `x.strip` can be passed around and called later, as in Python.
#include "text/jinja/methods.h"

#include <array>

#include "core/error.h"
#include "text/jinja/pystring.h"
#include "text/jinja/utf8.h"
#include "text/jinja/value_ops.h"

namespace sluice::jinja {
namespace {

std::optional<std::string> opt_string(const Value& v, const char* method) {
  if (v.is_undefined() || v.is_none()) return std::nullopt;
  if (!v.is_string()) fail(method, " arg must be None or str");
  return v.str();
}

int64_t opt_int(const Value& v, int64_t dflt) {
  if (v.is_undefined() || v.is_none()) return dflt;
  if (!v.is_int() && !v.is_bool())
    fail("'", v.type_name(), "' object cannot be interpreted as an integer");
  return v.as_int();
}

Value string_list(const std::vector<std::string>& parts) {
  ValueList out;
  for (const auto& p : parts) out.push_back(Value::string(p));
  return Value::list(std::move(out));
}

bool affix_match(const std::string& s, const Value& affix, bool prefix, const char* method) {
  auto one = [&](const Value& a) {
    if (!a.is_string())
      fail(method, " first arg must be str or a tuple of str, not ", a.type_name());
    const std::string& t = a.str();
    if (t.size() > s.size()) return false;
    return prefix ? s.compare(0, t.size(), t) == 0
                  : s.compare(s.size() - t.size(), t.size(), t) == 0;
  };
  if (affix.is_list() && affix.seq_kind() == SeqKind::Tuple) {
    for (const Value& a : affix.items()) {
      if (one(a)) return true;
    }
    return false;
  }
  return one(affix);
}

// The searching, padding and classifying methods (find, count, join, center, partition, is*).
std::optional<Value> string_search_method(const std::string& s, const std::string& name) {
  using Fn = std::function<Value(CallArgs&)>;
  Fn fn;
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    bool reverse = name[0] == 'r', strict = name.find("index") != std::string::npos;
    fn = [s, reverse, strict](CallArgs& a) {
      Value sub = a.get(0, "sub");
      if (!sub.is_string()) fail("must be str, not ", sub.type_name());
      int64_t at = py_find(s, sub.str(), reverse);
      if (at < 0 && strict) fail("substring not found");
      return Value::integer(at);
    };
  } else if (name == "count") {
    fn = [s](CallArgs& a) {
      Value sub = a.get(0, "sub");
      if (!sub.is_string()) fail("must be str, not ", sub.type_name());
      return Value::integer(py_count(s, sub.str()));
    };
  } else if (name == "join") {
    fn = [s](CallArgs& a) {
      std::string out;
      bool first = true;
      for (const Value& v : iterate(a.get(0, "iterable"))) {
        if (!v.is_string()) fail("sequence item: expected str instance, ", v.type_name(), " found");
        if (!first) out += s;
        out += v.str();
        first = false;
      }
      return Value::string(std::move(out));
    };
  } else if (name == "center" || name == "ljust" || name == "rjust" || name == "zfill") {
    fn = [s, name](CallArgs& a) {
      int64_t width = opt_int(a.get(0, "width"), 0);
      std::string fill = name == "zfill"        ? "0"
                         : a.has(1, "fillchar") ? a.get(1, "fillchar").str()
                                                : " ";
      int64_t pad = width - static_cast<int64_t>(utf8_length(s));
      if (name == "center") return Value::string(py_center(s, width, fill));
      std::string padding;
      for (int64_t i = 0; i < pad; ++i) padding += fill;
      if (name == "ljust") return Value::string(s + padding);
      if (name == "zfill" && !s.empty() && (s[0] == '-' || s[0] == '+'))
        return Value::string(s.substr(0, 1) + padding + s.substr(1));
      return Value::string(padding + s);
    };
  } else if (name == "removeprefix" || name == "removesuffix") {
    bool prefix = name == "removeprefix";
    fn = [s, prefix, name](CallArgs& a) {
      Value affix = a.get(0, "");
      if (!affix.is_string()) fail(name, "() argument must be str, not ", affix.type_name());
      if (!affix_match(s, affix, prefix, name.c_str())) return Value::string(s);
      size_t n = affix.str().size();
      return Value::string(prefix ? s.substr(n) : s.substr(0, s.size() - n));
    };
  } else if (name == "partition" || name == "rpartition") {
    bool reverse = name == "rpartition";
    fn = [s, reverse](CallArgs& a) {
      std::string sep = a.get(0, "sep").str();
      size_t at = reverse ? s.rfind(sep) : s.find(sep);
      if (at == std::string::npos) {
        ValueList parts = reverse
                              ? ValueList{Value::string(""), Value::string(""), Value::string(s)}
                              : ValueList{Value::string(s), Value::string(""), Value::string("")};
        return Value::list(std::move(parts), SeqKind::Tuple);
      }
      return Value::list({Value::string(s.substr(0, at)), Value::string(sep),
                          Value::string(s.substr(at + sep.size()))},
                         SeqKind::Tuple);
    };
  } else if (name.size() > 2 && name.compare(0, 2, "is") == 0 &&
             (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" ||
              name == "isupper" || name == "islower" || name == "isnumeric" ||
              name == "isdecimal")) {
    std::string what = name.substr(2);
    if (what == "numeric" || what == "decimal") what = "digit";
    fn = [s, what](CallArgs&) { return Value::boolean(py_is(s, what)); };
  } else {
    return std::nullopt;
  }
  return Value::function("str." + name, std::move(fn));
}

std::optional<Value> string_method(const std::string& s, const std::string& name) {
  using Fn = std::function<Value(CallArgs&)>;
  Fn fn;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    bool left = name != "rstrip", right = name != "lstrip";
    fn = [s, left, right, name](CallArgs& a) {
      return Value::string(py_strip(s, opt_string(a.get(0, "chars"), name.c_str()), left, right));
    };
  } else if (name == "split" || name == "rsplit") {
    bool reverse = name == "rsplit";
    fn = [s, reverse](CallArgs& a) {
      auto sep = opt_string(a.get(0, "sep"), "split");
      int64_t maxsplit = opt_int(a.get(1, "maxsplit"), -1);
      return string_list(reverse ? py_rsplit(s, sep, maxsplit) : py_split(s, sep, maxsplit));
    };
  } else if (name == "splitlines") {
    fn = [s](CallArgs& a) { return string_list(py_splitlines(s, a.get(0, "keepends").truthy())); };
  } else if (name == "startswith" || name == "endswith") {
    bool prefix = name == "startswith";
    fn = [s, prefix, name](CallArgs& a) {
      return Value::boolean(affix_match(s, a.get(0, ""), prefix, name.c_str()));
    };
  } else if (name == "replace") {
    fn = [s](CallArgs& a) {
      Value old = a.get(0, "old"), repl = a.get(1, "new");
      if (!old.is_string() || !repl.is_string())
        fail("replace() argument must be str, not ", (old.is_string() ? repl : old).type_name());
      return Value::string(py_replace(s, old.str(), repl.str(), opt_int(a.get(2, "count"), -1)));
    };
  } else if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" ||
             name == "casefold") {
    fn = [s, name](CallArgs&) {
      if (name == "upper") return Value::string(py_upper(s));
      if (name == "title") return Value::string(py_title(s));
      if (name == "capitalize") return Value::string(py_capitalize(s));
      return Value::string(py_lower(s));
    };
  } else if (name == "format") {
    fn = [s](CallArgs& a) { return Value::string(str_format(s, a)); };
  } else {
    return string_search_method(s, name);
  }
  return Value::function("str." + name, std::move(fn));
}

Value unsafe(const std::string& name, const char* type) {
  return Value::undefined("access to attribute '" + name + "' of '" + type + "' object is unsafe.");
}

std::optional<Value> dict_method(const Value& obj, const std::string& name) {
  static const std::array<const char*, 5> kMutating = {"pop", "popitem", "setdefault", "update",
                                                       "clear"};
  for (const char* m : kMutating) {
    if (name == m) return unsafe(name, "dict");
  }
  std::shared_ptr<Dict> d = obj.dict_ptr();
  if (name == "items") {
    return Value::function("dict.items", [d](CallArgs&) {
      ValueList out;
      for (const auto& [k, v] : d->items) out.push_back(Value::list({k, v}, SeqKind::Tuple));
      return Value::list(std::move(out));
    });
  }
  if (name == "keys" || name == "values") {
    bool keys = name == "keys";
    return Value::function("dict." + name, [d, keys](CallArgs&) {
      ValueList out;
      for (const auto& [k, v] : d->items) out.push_back(keys ? k : v);
      return Value::list(std::move(out));
    });
  }
  if (name == "get") {
    return Value::function("dict.get", [d](CallArgs& a) {
      const Value* v = d->find(a.get(0, "key"));
      if (v) return *v;
      Value dflt = a.get(1, "default");
      return dflt.is_undefined() ? Value::none() : dflt;
    });
  }
  if (name == "copy") {
    return Value::function("dict.copy",
                           [d](CallArgs&) { return Value::dict(std::make_shared<Dict>(*d)); });
  }
  return std::nullopt;
}

std::optional<Value> list_method(const Value& obj, const std::string& name) {
  static const std::array<const char*, 8> kMutating = {"append", "extend",  "insert", "pop",
                                                       "remove", "reverse", "sort",   "clear"};
  const char* type = obj.seq_kind() == SeqKind::Tuple ? "tuple" : "list";
  if (obj.seq_kind() == SeqKind::List) {
    for (const char* m : kMutating) {
      if (name == m) return unsafe(name, type);
    }
  }
  if (name == "index" || name == "count") {
    bool index = name == "index";
    Value self = obj;
    return Value::function(std::string(type) + "." + name, [self, index](CallArgs& a) {
      Value x = a.get(0, "value");
      int64_t n = 0;
      for (size_t i = 0; i < self.items().size(); ++i) {
        if (!values_equal(self.items()[i], x)) continue;
        if (index) return Value::integer(static_cast<int64_t>(i));
        ++n;
      }
      if (index) fail(x.repr(), " is not in list");
      return Value::integer(n);
    });
  }
  if (name == "copy" && obj.seq_kind() == SeqKind::List) {
    Value self = obj;
    return Value::function("list.copy", [self](CallArgs&) { return Value::list(self.items()); });
  }
  return std::nullopt;
}

}  // namespace

std::optional<Value> find_method(const Value& obj, const std::string& name) {
  if (obj.is_string()) return string_method(obj.str(), name);
  if (obj.is_dict() && !obj.is_namespace()) return dict_method(obj, name);
  if (obj.is_list() && obj.seq_kind() != SeqKind::Generator) return list_method(obj, name);
  return std::nullopt;
}

}  // namespace sluice::jinja
