// The builtin filters, in a name → function table. Argument names and defaults follow
// jinja2/filters.py so keyword calls (`map(attribute='x')`, `tojson(indent=2)`) bind the same.
#include "text/jinja/filters.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <unordered_map>

#include "core/error.h"
#include "text/jinja/pystring.h"
#include "text/jinja/utf8.h"
#include "text/jinja/value_json.h"
#include "text/jinja/value_ops.h"

namespace sluice::jinja {
namespace {

using FilterFn = std::function<Value(const Value&, CallArgs&)>;

Value arg(CallArgs& a, size_t i, std::string_view name, Value dflt) {
  Value v = a.get(i, name);
  return a.has(i, name) ? v : dflt;
}

Value generator(ValueList items) {
  return Value::list(std::move(items), SeqKind::Generator);
}

// jinja2's make_attrgetter: dotted path, integer parts index, environment.getitem semantics.
Value attr_path(const Value& item, const std::string& path, const Value& dflt = Value()) {
  Value v = item;
  size_t start = 0;
  while (start <= path.size()) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool numeric = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    v = get_item(v, numeric ? Value::integer(std::stoll(part)) : Value::string(part));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (v.is_undefined() && !dflt.is_undefined()) return dflt;
  return v;
}

Value sort_key(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value::string(py_lower(v.str())) : v;
}

void stable_sort(ValueList& items, const std::function<Value(const Value&)>& key, bool reverse) {
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& v : items) keyed.emplace_back(key(v), v);
  std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& a, const auto& b) {
    return reverse ? value_less(b.first, a.first) : value_less(a.first, b.first);
  });
  for (size_t i = 0; i < items.size(); ++i) items[i] = keyed[i].second;
}

Value f_tojson(const Value& v, CallArgs& a) {
  JsonDumpOptions o;
  o.ensure_ascii = a.get(0, "ensure_ascii").truthy();
  Value indent = a.get(1, "indent");
  if (indent.is_int())
    o.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, indent.as_int())), ' ');
  if (indent.is_string()) o.indent = indent.str();
  Value seps = a.get(2, "separators");
  if (seps.is_list() && seps.items().size() == 2)
    o.separators = std::make_pair(seps.items()[0].str(), seps.items()[1].str());
  o.sort_keys = a.get(3, "sort_keys").truthy();
  return Value::string(dump_json(v, o));
}

Value f_default(const Value& v, CallArgs& a) {
  Value dflt = arg(a, 0, "default_value", Value::string(""));
  if (v.is_undefined() || (a.get(1, "boolean").truthy() && !v.truthy())) return dflt;
  return v;
}

Value f_trim(const Value& v, CallArgs& a) {
  Value chars = a.get(0, "chars");
  std::optional<std::string> set;
  if (chars.is_string()) set = chars.str();
  return Value::string(py_strip(v.to_str(), set, true, true));
}

Value f_join(const Value& v, CallArgs& a) {
  std::string sep = arg(a, 0, "d", Value::string("")).to_str();
  Value attribute = a.get(1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += (attribute.is_undefined() || attribute.is_none() ? item
                                                            : attr_path(item, attribute.to_str()))
               .to_str();
  }
  return Value::string(std::move(out));
}

// jinja2's title(): words start after runs of whitespace, '-', '(', '{', '[' or '<'.
Value f_title(const Value& v, CallArgs&) {
  std::u32string cps = utf8_decode(v.to_str());
  std::string out;
  bool word_start = true;
  for (char32_t c : cps) {
    bool sep = is_py_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) {
      utf8_append(out, c);
      word_start = true;
    } else {
      utf8_append(out, word_start ? py_upper(c) : py_lower(c));
      word_start = false;
    }
  }
  return Value::string(std::move(out));
}

Value f_items(const Value& v, CallArgs&) {
  if (v.is_undefined()) return generator({});
  if (!v.is_dict() || v.is_namespace()) fail("Can only get item pairs from a mapping.");
  ValueList out;
  for (const auto& [k, val] : v.dict_ref().items)
    out.push_back(Value::list({k, val}, SeqKind::Tuple));
  return generator(std::move(out));
}

Value f_dictsort(const Value& v, CallArgs& a) {
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_dict()) fail("You can only sort by either \"key\" or \"value\"");
  bool case_sensitive = a.get(0, "case_sensitive").truthy();
  std::string by = arg(a, 1, "by", Value::string("key")).to_str();
  if (by != "key" && by != "value") fail("You can only sort by either \"key\" or \"value\"");
  ValueList items;
  for (const auto& [k, val] : v.dict_ref().items)
    items.push_back(Value::list({k, val}, SeqKind::Tuple));
  size_t pos = by == "key" ? 0 : 1;
  stable_sort(
      items, [&](const Value& item) { return sort_key(item.items()[pos], case_sensitive); },
      a.get(2, "reverse").truthy());
  return Value::list(std::move(items));
}

Value f_replace(const Value& v, CallArgs& a) {
  Value count = a.get(2, "count");
  return Value::string(py_replace(v.to_str(), a.get(0, "old").to_str(), a.get(1, "new").to_str(),
                                  count.is_undefined() || count.is_none() ? -1 : count.as_int()));
}

Value f_first(const Value& v, CallArgs&) {
  ValueList items = iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(const Value& v, CallArgs&) {
  if (v.is_list() && v.seq_kind() == SeqKind::Generator)
    fail("'generator' object is not reversible");
  ValueList items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value f_indent(const Value& v, CallArgs& a) {
  Value width = arg(a, 0, "width", Value::integer(4));
  std::string pad =
      width.is_string()
          ? width.str()
          : std::string(static_cast<size_t>(std::max<int64_t>(0, width.as_int())), ' ');
  if (v.is_undefined()) fail_undefined(v);
  std::string s = v.to_str() + "\n";
  std::vector<std::string> lines = py_splitlines(s, false);
  std::string rv;
  if (a.get(2, "blank").truthy()) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + pad : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? "" : pad + lines[i]);
  }
  if (a.get(1, "first").truthy()) rv = pad + rv;
  return Value::string(std::move(rv));
}

Value f_map(const Value& v, CallArgs& a) {
  ValueList out;
  if (!v.truthy()) return generator({});  // jinja2 only iterates a truthy value
  Value attribute = a.get(SIZE_MAX, "attribute");
  if (!attribute.is_undefined()) {
    Value dflt = a.get(SIZE_MAX, "default");
    for (const Value& item : iterate(v)) out.push_back(attr_path(item, attribute.to_str(), dflt));
    return generator(std::move(out));
  }
  if (a.positional.empty()) fail("map requires a filter argument");
  std::string name = a.positional[0].to_str();
  if (!is_filter(name)) fail("No filter named '", name, "'.");
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (const Value& item : iterate(v)) out.push_back(apply_filter(name, item, rest));
  return generator(std::move(out));
}

bool run_test(const Value& item, CallArgs& a, size_t first) {
  if (a.positional.size() <= first) return item.truthy();
  std::string name = a.positional[first].to_str();
  if (!is_test(name)) fail("No test named '", name, "'.");
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(first) + 1,
                         a.positional.end());
  rest.keyword = a.keyword;
  return apply_test(name, item, rest);
}

FilterFn select_filter(bool attr, bool keep) {
  return [attr, keep](const Value& v, CallArgs& a) {
    ValueList out;
    if (!v.truthy()) return generator({});  // jinja2 only iterates a truthy value
    for (const Value& item : iterate(v)) {
      Value probe = attr ? attr_path(item, a.get(0, "attribute").to_str()) : item;
      if (run_test(probe, a, attr ? 1 : 0) == keep) out.push_back(item);
    }
    return generator(std::move(out));
  };
}

Value f_unique(const Value& v, CallArgs& a) {
  bool case_sensitive = a.get(0, "case_sensitive").truthy();
  Value attribute = a.get(1, "attribute");
  ValueList out, seen;
  for (const Value& item : iterate(v)) {
    Value key = sort_key(attribute.is_undefined() || attribute.is_none()
                             ? item
                             : attr_path(item, attribute.to_str()),
                         case_sensitive);
    if (std::none_of(seen.begin(), seen.end(),
                     [&](const Value& s) { return values_equal(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return generator(std::move(out));
}

std::function<Value(const Value&)> item_key(const Value& attribute, bool case_sensitive) {
  std::vector<std::string> parts;
  if (!attribute.is_undefined() && !attribute.is_none()) {
    for (const std::string& p : py_split(attribute.to_str(), std::string(","), -1))
      parts.push_back(py_strip(p, std::nullopt, true, true));
  }
  return [parts, case_sensitive](const Value& item) {
    if (parts.empty()) return sort_key(item, case_sensitive);
    if (parts.size() == 1) return sort_key(attr_path(item, parts[0]), case_sensitive);
    ValueList keys;
    for (const auto& p : parts) keys.push_back(sort_key(attr_path(item, p), case_sensitive));
    return Value::list(std::move(keys));
  };
}

Value f_sort(const Value& v, CallArgs& a) {
  ValueList items = iterate(v);
  stable_sort(items, item_key(a.get(2, "attribute"), a.get(1, "case_sensitive").truthy()),
              a.get(0, "reverse").truthy());
  return Value::list(std::move(items));
}

FilterFn min_max(bool want_max) {
  return [want_max](const Value& v, CallArgs& a) {
    ValueList items = iterate(v);
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    auto key = item_key(a.get(1, "attribute"), a.get(0, "case_sensitive").truthy());
    Value best = items[0], best_key = key(items[0]);
    for (size_t i = 1; i < items.size(); ++i) {
      Value k = key(items[i]);
      if (want_max ? value_less(best_key, k) : value_less(k, best_key))
        best = items[i], best_key = k;
    }
    return best;
  };
}

Value f_int(const Value& v, CallArgs& a) {
  Value dflt = arg(a, 0, "default", Value::integer(0));
  if (v.is_float()) return Value::integer(static_cast<int64_t>(std::trunc(v.as_float())));
  if (v.is_number()) return Value::integer(v.as_int());
  if (v.is_string()) {
    std::string s = py_strip(v.str(), std::nullopt, true, true);
    int64_t base = arg(a, 1, "base", Value::integer(10)).as_int();
    try {
      size_t used = 0;
      std::string digits;
      for (char c : s) {
        if (c != '_') digits.push_back(c);
      }
      int64_t r = std::stoll(digits, &used, static_cast<int>(base));
      if (used == digits.size()) return Value::integer(r);
    } catch (...) {
    }
    try {
      size_t used = 0;
      double d = std::stod(s, &used);
      if (used == s.size()) return Value::integer(static_cast<int64_t>(std::trunc(d)));
    } catch (...) {
    }
  }
  return dflt;
}

Value f_float(const Value& v, CallArgs& a) {
  Value dflt = arg(a, 0, "default", Value::number(0.0));
  if (v.is_number()) return Value::number(v.as_float());
  if (v.is_string()) {
    try {
      std::string s = py_strip(v.str(), std::nullopt, true, true);
      size_t used = 0;
      double d = std::stod(s, &used);
      if (used == s.size()) return Value::number(d);
    } catch (...) {
    }
  }
  return dflt;
}

Value f_round(const Value& v, CallArgs& a) {
  int64_t precision = arg(a, 0, "precision", Value::integer(0)).as_int();
  std::string method = arg(a, 1, "method", Value::string("common")).to_str();
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = v.as_float() * scale;
  double r = method == "ceil"    ? std::ceil(x)
             : method == "floor" ? std::floor(x)
                                 : std::nearbyint(x);
  if (method == "common" && v.is_int() && precision >= 0)
    return v;  // Python: round(int, n) is the int
  return Value::number(r / scale);
}

Value f_escape(const Value& v, CallArgs&) {
  return v.is_markup() ? v : Value::markup(html_escape(v.to_str()));
}

Value f_wordcount(const Value& v, CallArgs&) {
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : utf8_decode(v.to_str())) {
    bool w = c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
             (c >= 'A' && c <= 'Z') || (c >= 0x80 && !is_py_space(c));
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

Value f_batch(const Value& v, CallArgs& a) {
  int64_t count = a.get(0, "linecount").as_int();
  if (count <= 0) fail("batch linecount must be positive");
  Value fill = a.get(1, "fill_with");
  ValueList out, cur;
  for (const Value& item : iterate(v)) {
    cur.push_back(item);
    if (static_cast<int64_t>(cur.size()) == count)
      out.push_back(Value::list(std::move(cur))), cur.clear();
  }
  if (!cur.empty()) {
    if (!fill.is_undefined() && !fill.is_none()) {
      while (static_cast<int64_t>(cur.size()) < count) cur.push_back(fill);
    }
    out.push_back(Value::list(std::move(cur)));
  }
  return generator(std::move(out));
}

Value f_truncate(const Value& v, CallArgs& a) {
  std::u32string s = utf8_decode(v.to_str());
  int64_t length = arg(a, 0, "length", Value::integer(255)).as_int();
  bool killwords = a.get(1, "killwords").truthy();
  std::u32string end = utf8_decode(arg(a, 2, "end", Value::string("...")).to_str());
  int64_t leeway = arg(a, 3, "leeway", Value::integer(5)).as_int();
  if (static_cast<int64_t>(s.size()) <= length + leeway)
    return v.is_string() ? v : Value::string(v.to_str());
  size_t keep =
      static_cast<size_t>(std::max<int64_t>(0, length - static_cast<int64_t>(end.size())));
  std::u32string head = s.substr(0, keep);
  if (!killwords) {
    size_t sp = head.rfind(U' ');
    if (sp != std::u32string::npos) head = head.substr(0, sp);
  }
  return Value::string(utf8_encode(head + end));
}

Value f_sum(const Value& v, CallArgs& a) {
  Value attribute = a.get(0, "attribute");
  Value total = arg(a, 1, "start", Value::integer(0));
  if (total.is_string()) fail("sum() can't sum strings [use ''.join(seq) instead]");
  for (const Value& item : iterate(v)) {
    total = binary_op("+", total,
                      attribute.is_undefined() || attribute.is_none()
                          ? item
                          : attr_path(item, attribute.to_str()));
  }
  return total;
}

Value f_reverse(const Value& v, CallArgs&) {
  if (v.is_string()) {
    std::u32string s = utf8_decode(v.str());
    std::reverse(s.begin(), s.end());
    return Value::string(utf8_encode(s));
  }
  ValueList items = iterate(v);
  std::reverse(items.begin(), items.end());
  return generator(std::move(items));
}

Value f_format(const Value& v, CallArgs& a) {
  if (!a.keyword.empty()) {
    auto d = std::make_shared<Dict>();
    for (const auto& [k, val] : a.keyword) d->set(Value::string(k), val);
    return Value::string(percent_format(v.to_str(), Value::dict(std::move(d))));
  }
  return Value::string(percent_format(v.to_str(), Value::list(a.positional, SeqKind::Tuple)));
}

const std::unordered_map<std::string_view, FilterFn>& filter_table() {
  static const std::unordered_map<std::string_view, FilterFn> table = {
      {"tojson", f_tojson},
      {"default", f_default},
      {"d", f_default},
      {"length", [](const Value& v, CallArgs&) { return Value::integer(length(v)); }},
      {"count", [](const Value& v, CallArgs&) { return Value::integer(length(v)); }},
      {"trim", f_trim},
      {"string", [](const Value& v, CallArgs&) { return Value::string(v.to_str()); }},
      {"safe", [](const Value& v, CallArgs&) { return Value::markup(v.to_str()); }},
      {"join", f_join},
      {"upper", [](const Value& v, CallArgs&) { return Value::string(py_upper(v.to_str())); }},
      {"lower", [](const Value& v, CallArgs&) { return Value::string(py_lower(v.to_str())); }},
      {"capitalize",
       [](const Value& v, CallArgs&) { return Value::string(py_capitalize(v.to_str())); }},
      {"title", f_title},
      {"items", f_items},
      {"dictsort", f_dictsort},
      {"list", [](const Value& v, CallArgs&) { return Value::list(iterate(v)); }},
      {"replace", f_replace},
      {"first", f_first},
      {"last", f_last},
      {"indent", f_indent},
      {"map", f_map},
      {"select", select_filter(false, true)},
      {"reject", select_filter(false, false)},
      {"selectattr", select_filter(true, true)},
      {"rejectattr", select_filter(true, false)},
      {"unique", f_unique},
      {"sort", f_sort},
      {"min", min_max(false)},
      {"max", min_max(true)},
      {"int", f_int},
      {"float", f_float},
      {"abs",
       [](const Value& v, CallArgs&) {
         if (v.is_float()) return Value::number(std::fabs(v.as_float()));
         if (!v.is_number()) fail("bad operand type for abs(): '", v.type_name(), "'");
         return Value::integer(std::llabs(v.as_int()));
       }},
      {"round", f_round},
      {"escape", f_escape},
      {"e", f_escape},
      {"forceescape",
       [](const Value& v, CallArgs&) { return Value::markup(html_escape(v.to_str())); }},
      {"wordcount", f_wordcount},
      {"center",
       [](const Value& v, CallArgs& a) {
         return Value::string(
             py_center(v.to_str(), arg(a, 0, "width", Value::integer(80)).as_int()));
       }},
      {"batch", f_batch},
      {"truncate", f_truncate},
      {"sum", f_sum},
      {"reverse", f_reverse},
      {"format", f_format},
      {"attr", [](const Value& v, CallArgs& a) { return get_attr(v, a.get(0, "name").to_str()); }},
  };
  return table;
}

}  // namespace

bool is_filter(std::string_view name) {
  return filter_table().count(name) > 0;
}

Value apply_filter(std::string_view name, const Value& value, CallArgs& args) {
  auto it = filter_table().find(name);
  if (it == filter_table().end()) fail("No filter named '", name, "' found.");
  return it->second(value, args);
}

}  // namespace sluice::jinja
