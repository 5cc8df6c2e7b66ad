// CPython str methods reimplemented over UTF-8 (decoded to code points where Python counts in
// code points). Formatting covers the format-spec subset templates use: fill/align, sign,
// width, precision and the s/d/f/x/r types.
#include "text/jinja/pystring.h"

#include <cstdio>

#include "core/error.h"
#include "text/jinja/utf8.h"
#include "text/jinja/value_ops.h"

namespace sluice::jinja {

std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                     bool right) {
  std::u32string cps = utf8_decode(s);
  std::u32string set = chars ? utf8_decode(*chars) : std::u32string();
  auto strip_it = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : is_py_space(c);
  };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && strip_it(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strip_it(cps[e - 1])) --e;
  }
  return utf8_encode(std::u32string_view(cps).substr(b, e - b));
}

std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep,
                                  int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) fail("empty separator");
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t hit = s.find(*sep, pos);
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, hit - pos));
      pos = hit + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  std::u32string cps = utf8_decode(s);
  size_t i = 0;
  while (i < cps.size()) {
    while (i < cps.size() && is_py_space(cps[i])) ++i;
    if (i >= cps.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
      size_t e = cps.size();
      while (e > i && is_py_space(cps[e - 1])) --e;
      out.push_back(utf8_encode(std::u32string_view(cps).substr(i, e - i)));
      break;
    }
    size_t j = i;
    while (j < cps.size() && !is_py_space(cps[j])) ++j;
    out.push_back(utf8_encode(std::u32string_view(cps).substr(i, j - i)));
    i = j;
  }
  return out;
}

std::vector<std::string> py_rsplit(std::string_view s, const std::optional<std::string>& sep,
                                   int64_t maxsplit) {
  if (maxsplit < 0) return py_split(s, sep, maxsplit);
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) fail("empty separator");
    size_t end = s.size();
    while (static_cast<int64_t>(out.size()) < maxsplit) {
      size_t hit = end >= sep->size() ? s.rfind(*sep, end - sep->size()) : std::string_view::npos;
      if (hit == std::string_view::npos) break;
      out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    out.emplace_back(s.substr(0, end));
    return {out.rbegin(), out.rend()};
  }
  std::u32string cps = utf8_decode(s);
  size_t e = cps.size();
  while (e > 0) {
    while (e > 0 && is_py_space(cps[e - 1])) --e;
    if (e == 0) break;
    if (static_cast<int64_t>(out.size()) >= maxsplit) {
      size_t b = 0;
      while (b < e && is_py_space(cps[b])) ++b;
      out.push_back(utf8_encode(std::u32string_view(cps).substr(b, e - b)));
      break;
    }
    size_t b = e;
    while (b > 0 && !is_py_space(cps[b - 1])) --b;
    out.push_back(utf8_encode(std::u32string_view(cps).substr(b, e - b)));
    e = b;
  }
  return {out.rbegin(), out.rend()};
}

std::vector<std::string> py_splitlines(std::string_view s, bool keepends) {
  std::u32string cps = utf8_decode(s);
  std::vector<std::string> out;
  size_t start = 0, i = 0;
  while (i < cps.size()) {
    char32_t c = cps[i];
    bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
               c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) {
      ++i;
      continue;
    }
    size_t end = i + ((c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ? 2 : 1);
    out.push_back(
        utf8_encode(std::u32string_view(cps).substr(start, (keepends ? end : i) - start)));
    start = i = end;
  }
  if (start < cps.size()) out.push_back(utf8_encode(std::u32string_view(cps).substr(start)));
  return out;
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view repl,
                       int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts repl between every code point (and at both ends).
    std::u32string cps = utf8_decode(s);
    int64_t n = 0;
    for (char32_t c : cps) {
      if (count < 0 || n < count) out += repl, ++n;
      utf8_append(out, c);
    }
    if (count < 0 || n < count) out += repl;
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    size_t hit = s.find(old, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(repl);
    pos = hit + old.size();
    ++n;
  }
  out.append(s.substr(pos));
  return out;
}

int64_t py_count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(utf8_length(s)) + 1;
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size()))
    ++n;
  return n;
}

int64_t py_find(std::string_view s, std::string_view sub, bool reverse) {
  size_t hit = reverse ? s.rfind(sub) : s.find(sub);
  if (hit == std::string_view::npos) return -1;
  return static_cast<int64_t>(utf8_length(s.substr(0, hit)));
}

std::string py_upper(std::string_view s) {
  std::string out;
  for (char32_t c : utf8_decode(s)) {
    if (c == 0xDF) {
      out += "SS";  // German sharp s upper-cases to two letters in Python
    } else {
      utf8_append(out, jinja::py_upper(c));
    }
  }
  return out;
}

std::string py_lower(std::string_view s) {
  std::string out;
  for (char32_t c : utf8_decode(s)) utf8_append(out, jinja::py_lower(c));
  return out;
}

std::string py_title(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t c : utf8_decode(s)) {
    bool cased = is_py_alpha_cased(c);
    utf8_append(out, cased ? (prev_cased ? jinja::py_lower(c) : jinja::py_upper(c)) : c);
    prev_cased = cased;
  }
  return out;
}

std::string py_capitalize(std::string_view s) {
  std::u32string cps = utf8_decode(s);
  std::string out;
  for (size_t i = 0; i < cps.size(); ++i)
    utf8_append(out, i == 0 ? jinja::py_upper(cps[i]) : jinja::py_lower(cps[i]));
  return out;
}

std::string py_center(std::string_view s, int64_t width, std::string_view fill) {
  int64_t len = static_cast<int64_t>(utf8_length(s));
  if (width <= len) return std::string(s);
  int64_t marg = width - len;
  int64_t left = marg / 2 + (marg & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < marg - left; ++i) out += fill;
  return out;
}

bool py_is(std::string_view s, std::string_view what) {
  std::u32string cps = utf8_decode(s);
  if (cps.empty()) return false;
  bool any_cased = false;
  for (char32_t c : cps) {
    bool digit = c >= '0' && c <= '9';
    bool alpha =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= 0x80 && is_py_alpha_cased(c));
    if (what == "digit" && !digit) return false;
    if (what == "alpha" && !alpha) return false;
    if (what == "alnum" && !digit && !alpha) return false;
    if (what == "space" && !is_py_space(c)) return false;
    if (what == "upper" && jinja::py_upper(c) != c) return false;
    if (what == "lower" && jinja::py_lower(c) != c) return false;
    any_cased = any_cased || is_py_alpha_cased(c);
  }
  return (what == "upper" || what == "lower") ? any_cased : true;
}

namespace {

struct Spec {
  char fill = ' ', align = 0, sign = '-', type = 0;
  bool alternate = false, zero = false;
  int width = -1, precision = -1;
};

Spec parse_spec(std::string_view s) {
  Spec spec;
  size_t i = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (s.size() >= 2 && is_align(s[1])) {
    spec.fill = s[0], spec.align = s[1], i = 2;
  } else if (!s.empty() && is_align(s[0])) {
    spec.align = s[0], i = 1;
  }
  if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) spec.sign = s[i++];
  if (i < s.size() && s[i] == '#') spec.alternate = true, ++i;
  if (i < s.size() && s[i] == '0') spec.zero = true, ++i;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])))
    spec.width = (spec.width < 0 ? 0 : spec.width * 10) + (s[i++] - '0');
  if (i < s.size() && s[i] == '.') {
    spec.precision = 0;
    for (++i; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i)
      spec.precision = spec.precision * 10 + (s[i] - '0');
  }
  if (i < s.size()) spec.type = s[i];
  return spec;
}

std::string pad(std::string body, const Spec& spec, char default_align) {
  int64_t len = static_cast<int64_t>(utf8_length(body));
  if (spec.width < 0 || len >= spec.width) return body;
  char align = spec.align ? spec.align : (spec.zero ? '=' : default_align);
  char fill = spec.align ? spec.fill : (spec.zero ? '0' : spec.fill);
  size_t n = static_cast<size_t>(spec.width - len);
  if (align == '<') return body + std::string(n, fill);
  if (align == '^') return std::string(n / 2, fill) + body + std::string(n - n / 2, fill);
  if (align == '=' && !body.empty() && (body[0] == '-' || body[0] == '+'))
    return body.substr(0, 1) + std::string(n, fill) + body.substr(1);
  return std::string(n, fill) + body;
}

std::string format_value(const Value& v, const Spec& spec) {
  char type = spec.type;
  if (v.is_string() || (!v.is_number() && type != 'r')) {
    if (type && type != 's')
      fail("Unknown format code '", std::string(1, type), "' for object of type '", v.type_name(),
           "'");
    std::string s = v.to_str();
    if (spec.precision >= 0)
      s = utf8_encode(utf8_decode(s).substr(0, static_cast<size_t>(spec.precision)));
    return pad(s, spec, '<');
  }
  if (type == 'r') return pad(v.repr(), spec, '<');
  std::string body;
  char buf[512];
  if (type == 'd' || type == 'x' || type == 'X' || type == 'o' || type == 'b' ||
      (type == 0 && !v.is_float())) {
    if (v.is_float())
      fail("Unknown format code '", std::string(1, type), "' for object of type 'float'");
    int64_t i = v.as_int();
    const char* f = type == 'x' ? "%llx" : type == 'X' ? "%llX" : type == 'o' ? "%llo" : "%lld";
    std::snprintf(buf, sizeof buf, f,
                  static_cast<long long>(i < 0 && type != 'd' && type ? -i : i));
    body = buf;
    if (i < 0 && type && type != 'd') body = "-" + body;
  } else if (type == 0) {
    body = v.repr();
    if (spec.precision >= 0) {
      std::snprintf(buf, sizeof buf, "%.*g", spec.precision, v.as_float());
      body = buf;
    }
  } else if (type == 'f' || type == 'F' || type == 'e' || type == 'E' || type == 'g' ||
             type == 'G' || type == '%') {
    double x = v.as_float() * (type == '%' ? 100 : 1);
    std::string f = std::string("%.*") + (type == '%' ? 'f' : type);
    std::snprintf(buf, sizeof buf, f.c_str(), spec.precision < 0 ? 6 : spec.precision, x);
    body = buf;
    if (type == '%') body += "%";
  } else {
    fail("Unknown format code '", std::string(1, type), "' for object of type '", v.type_name(),
         "'");
  }
  if (spec.sign != '-' && !body.empty() && body[0] != '-') body = std::string(1, spec.sign) + body;
  return pad(body, spec, '>');
}

}  // namespace

std::string percent_format(std::string_view fmt, const Value& args) {
  ValueList list =
      args.is_list() && args.seq_kind() == SeqKind::Tuple ? args.items() : ValueList{args};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    size_t j = i + 1;
    const Value* named = nullptr;
    if (j < fmt.size() && fmt[j] == '(') {
      size_t close = fmt.find(')', j);
      if (close == std::string_view::npos) fail("incomplete format key");
      if (!args.is_dict()) fail("format requires a mapping");
      named = args.dict_ref().find(fmt.substr(j + 1, close - j - 1));
      if (!named) fail(string_repr(fmt.substr(j + 1, close - j - 1)));
      j = close + 1;
    }
    std::string spec_text;
    while (j < fmt.size() &&
           std::string_view("-+ #0123456789.").find(fmt[j]) != std::string_view::npos)
      spec_text.push_back(fmt[j++]);
    if (j >= fmt.size()) fail("incomplete format");
    char conv = fmt[j];
    i = j;
    if (conv == '%') {
      out.push_back('%');
      continue;
    }
    if (!named && next >= list.size()) fail("not enough arguments for format string");
    const Value& v = named ? *named : list[next++];
    Spec spec;
    size_t k = 0;
    for (; k < spec_text.size() &&
           std::string_view("-+ #0").find(spec_text[k]) != std::string_view::npos;
         ++k) {
      if (spec_text[k] == '-') spec.align = '<';
      if (spec_text[k] == '+' || spec_text[k] == ' ') spec.sign = spec_text[k];
      if (spec_text[k] == '0') spec.zero = true;
    }
    Spec parsed = parse_spec(spec_text.substr(k));
    spec.width = parsed.width;
    spec.precision = parsed.precision;
    if (conv == 's') {
      out += pad(v.to_str(), spec, '>');
    } else if (conv == 'r') {
      out += pad(v.repr(), spec, '>');
    } else {
      if (!v.is_number())
        fail("%", std::string(1, conv), " format: a real number is required, not ", v.type_name());
      spec.type = conv == 'i' || conv == 'u' ? 'd' : conv;
      Value n = (spec.type == 'd' || spec.type == 'x' || spec.type == 'X') && v.is_float()
                    ? Value::integer(static_cast<int64_t>(v.as_float()))
                    : v;
      if (spec.align != '<') spec.align = 0;
      out += format_value(n, spec);
    }
  }
  if (next < list.size() && !(list.size() == 1 && list[0].is_dict()))
    fail("not all arguments converted during string formatting");
  return out;
}

namespace {

// The value of one replacement field ("", "0" or "name", then `.attr` / `[key]` parts), as
// string.Formatter resolves it.
Value format_field(std::string_view field, const CallArgs& args, size_t& auto_index,
                   int& numbering) {
  size_t end = field.find_first_of(".[");
  std::string head(field.substr(0, end));
  Value v;
  // string.Formatter (jinja2's sandbox formats through it) refuses to mix {} and {0}, with this
  // one message whichever came first.
  if (head.empty() ? numbering == 2
                   : (std::isdigit(static_cast<unsigned char>(head[0])) && numbering == 1))
    fail("cannot switch from manual field specification to automatic field numbering");
  if (head.empty() || std::isdigit(static_cast<unsigned char>(head[0])))
    numbering = head.empty() ? 1 : 2;
  if (head.empty()) {
    v = args.positional.size() > auto_index ? args.positional[auto_index] : Value();
    if (auto_index++ >= args.positional.size())
      fail("Replacement index ", auto_index - 1, " out of range for positional args tuple");
  } else if (std::isdigit(static_cast<unsigned char>(head[0]))) {
    size_t idx = std::stoul(head);
    if (idx >= args.positional.size())
      fail("Replacement index ", idx, " out of range for positional args tuple");
    v = args.positional[idx];
  } else {
    bool found = false;
    for (const auto& [k, val] : args.keyword) {
      if (k == head) v = val, found = true;
    }
    if (!found) fail("'", head, "'");
  }
  for (size_t p = end; p != std::string_view::npos && p < field.size();) {
    if (field[p] == '.') {
      size_t q = field.find_first_of(".[", p + 1);
      v = get_attr(v,
                   std::string(field.substr(
                       p + 1, q == std::string_view::npos ? std::string_view::npos : q - p - 1)));
      p = q;
    } else {
      size_t q = field.find(']', p);
      std::string key(field.substr(p + 1, q - p - 1));
      bool numeric = !key.empty() && key.find_first_not_of("0123456789") == std::string::npos;
      v = get_item(v, numeric ? Value::integer(std::stoll(key)) : Value::string(key));
      p = q + 1;
    }
  }
  return v;
}

}  // namespace

std::string str_format(std::string_view fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  int numbering = 0;  // 1: automatic ({}), 2: manual ({0})
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}')
        ++i;
      else
        fail("Single '}' encountered in format string");
      out.push_back('}');
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string_view::npos) fail("Single '{' encountered in format string");
    std::string_view field = fmt.substr(i + 1, close - i - 1);
    i = close;
    std::string_view spec_text;
    size_t colon = field.find(':');
    if (colon != std::string_view::npos)
      spec_text = field.substr(colon + 1), field = field.substr(0, colon);
    size_t bang = field.find('!');
    char conversion = 0;
    if (bang != std::string_view::npos) conversion = field[bang + 1], field = field.substr(0, bang);
    Value v = format_field(field, args, auto_index, numbering);
    if (conversion == 'r') v = Value::string(v.repr());
    if (conversion == 's') v = Value::string(v.to_str());
    out += format_value(v, parse_spec(spec_text));
  }
  return out;
}

}  // namespace sluice::jinja
