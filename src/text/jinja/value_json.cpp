// Conversion between nlohmann JSON and jinja values, and a json.dumps twin. Python's encoder
// is mirrored rather than reusing nlohmann's dump, whose float formatting, separators and
// escaping differ from CPython's.
#include "text/jinja/value_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "text/jinja/utf8.h"

namespace sluice::jinja {

Value value_from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Value::integer(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float:
      return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList items;
      for (const auto& e : j) items.push_back(value_from_json(e));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto d = std::make_shared<Dict>();
      for (const auto& [k, v] : j.items())
        d->items.emplace_back(Value::string(k), value_from_json(v));
      return Value::dict(std::move(d));
    }
    default:
      fail("unsupported JSON value");
  }
}

namespace {

void escape_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out.push_back('"');
  for (char32_t c : utf8_decode(s)) {
    char buf[16];
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20 || (ensure_ascii && c > 0x7E)) {
          if (c >= 0x10000) {
            char32_t v = c - 0x10000;
            std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x",
                          static_cast<unsigned>(0xD800 | (v >> 10)),
                          static_cast<unsigned>(0xDC00 | (v & 0x3FF)));
          } else {
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          }
          out += buf;
        } else {
          utf8_append(out, c);
        }
    }
  }
  out.push_back('"');
}

std::string float_json(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
  return float_repr(f);
}

class Dumper {
 public:
  explicit Dumper(const JsonDumpOptions& o) : o_(o) {
    item_sep_ = o.separators ? o.separators->first : (o.indent ? "," : ", ");
    key_sep_ = o.separators ? o.separators->second : ": ";
  }

  void dump(const Value& v, int level) {
    switch (v.kind()) {
      case Kind::None:
        out += "null";
        return;
      case Kind::Bool:
        out += v.as_bool() ? "true" : "false";
        return;
      case Kind::Int:
        out += std::to_string(v.as_int());
        return;
      case Kind::Float:
        out += float_json(v.as_float());
        return;
      case Kind::String:
        escape_string(out, v.str(), o_.ensure_ascii);
        return;
      case Kind::List:
        if (v.seq_kind() != SeqKind::Generator) return dump_list(v.items(), level);
        break;
      case Kind::Dict:
        if (!v.is_namespace()) return dump_dict(v.dict_ref(), level);
        break;
      default:
        break;
    }
    fail("Object of type ", v.type_name(), " is not JSON serializable");
  }

  std::string out;

 private:
  void newline(int level) {
    out.push_back('\n');
    for (int i = 0; i < level; ++i) out += *o_.indent;
  }

  void dump_list(const ValueList& items, int level) {
    if (items.empty()) {
      out += "[]";
      return;
    }
    out.push_back('[');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += item_sep_;
      if (o_.indent) newline(level + 1);
      dump(items[i], level + 1);
    }
    if (o_.indent) newline(level);
    out.push_back(']');
  }

  std::string key_text(const Value& k) {
    if (k.is_string()) return k.str();
    if (k.is_bool()) return k.as_bool() ? "true" : "false";
    if (k.is_none()) return "null";
    if (k.is_int()) return std::to_string(k.as_int());
    if (k.is_float()) return float_json(k.as_float());
    fail("keys must be str, int, float, bool or None, not ", k.type_name());
  }

  void dump_dict(const Dict& d, int level) {
    if (d.items.empty()) {
      out += "{}";
      return;
    }
    std::vector<std::pair<std::string, const Value*>> items;
    for (const auto& [k, v] : d.items) items.emplace_back(key_text(k), &v);
    if (o_.sort_keys) {
      std::stable_sort(items.begin(), items.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    out.push_back('{');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += item_sep_;
      if (o_.indent) newline(level + 1);
      escape_string(out, items[i].first, o_.ensure_ascii);
      out += key_sep_;
      dump(*items[i].second, level + 1);
    }
    if (o_.indent) newline(level);
    out.push_back('}');
  }

  const JsonDumpOptions& o_;
  std::string item_sep_, key_sep_;
};

}  // namespace

std::string dump_json(const Value& v, const JsonDumpOptions& options) {
  Dumper d(options);
  d.dump(v, 0);
  return std::move(d.out);
}

}  // namespace sluice::jinja
