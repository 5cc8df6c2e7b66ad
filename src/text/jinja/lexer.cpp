// Lexer for jinja2 templates: splits data from tags, applies whitespace control exactly as
// jinja2's regex lexer does (a tag's `-` strips all adjacent whitespace; lstrip_blocks removes
// spaces/tabs before a block or comment tag that starts its line; trim_blocks removes one newline
// after a block or comment tag), and tokenizes tag contents with balanced-bracket end detection.
#include "text/jinja/lexer.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "core/error.h"
#include "text/jinja/utf8.h"
#include "text/jinja/value.h"

namespace sluice::jinja {
namespace {

std::string normalize_newlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

void rstrip_ws(std::string& s) {
  while (!s.empty() && is_ws(s.back())) s.pop_back();
}

// Python's unicode-escape decoding of a string literal body (jinja2 decodes literals that way).
std::string decode_string_literal(std::string_view body) {
  std::u32string cps = utf8_decode(body);
  std::string out;
  for (size_t i = 0; i < cps.size(); ++i) {
    char32_t c = cps[i];
    if (c != '\\' || i + 1 >= cps.size()) {
      utf8_append(out, c);
      continue;
    }
    char32_t n = cps[++i];
    auto hex = [&](size_t digits) -> char32_t {
      char32_t v = 0;
      for (size_t k = 0; k < digits; ++k) {
        if (i + 1 >= cps.size() || !std::isxdigit(static_cast<int>(cps[i + 1])))
          fail("invalid \\x, \\u or \\U escape in a string literal");
        char32_t d = cps[++i];
        v = v * 16 + (d <= '9' ? d - '0' : (d | 0x20) - 'a' + 10);
      }
      return v;
    };
    switch (n) {
      case '\n':
        break;
      case '\\':
        out.push_back('\\');
        break;
      case '\'':
        out.push_back('\'');
        break;
      case '"':
        out.push_back('"');
        break;
      case 'a':
        out.push_back('\a');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'v':
        out.push_back('\v');
        break;
      case 'x':
        utf8_append(out, hex(2));
        break;
      case 'u':
        utf8_append(out, hex(4));
        break;
      case 'U':
        utf8_append(out, hex(8));
        break;
      default:
        if (n >= '0' && n <= '7') {
          char32_t v = n - '0';
          for (int k = 0; k < 2 && i + 1 < cps.size() && cps[i + 1] >= '0' && cps[i + 1] <= '7';
               ++k)
            v = v * 8 + (cps[++i] - '0');
          utf8_append(out, v);
        } else {
          out.push_back('\\');
          utf8_append(out, n);
        }
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string source, const LexOptions& options) : src_(std::move(source)), opt_(options) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      size_t start = find_opener(pos_);
      std::string data =
          src_.substr(pos_, start == std::string::npos ? std::string::npos : start - pos_);
      apply_leading(data);
      if (start == std::string::npos) {
        emit_data(std::move(data));
        break;
      }
      char kind = src_[start + 1];
      size_t p = start + 2;
      char mod = p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p] : 0;
      if (mod == '-') {
        rstrip_ws(data);
      } else if (kind != '{' && mod != '+' && opt_.lstrip_blocks && starts_line(start)) {
        while (!data.empty() && (data.back() == ' ' || data.back() == '\t')) data.pop_back();
      }
      emit_data(std::move(data));
      if (mod) ++p;
      if (kind == '#') {
        comment(p);
      } else if (kind == '%' && raw_block(p)) {
        continue;
      } else {
        tag(kind, p, start);
      }
    }
    tokens_.push_back(Token{Tok::Eof, "", 0, 0, line_at(src_.size())});
    return std::move(tokens_);
  }

 private:
  size_t find_opener(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    }
    return std::string::npos;
  }

  // Only spaces and tabs between the start of the line and the tag.
  bool starts_line(size_t start) const {
    for (size_t i = start; i > 0; --i) {
      char c = src_[i - 1];
      if (c == '\n') return true;
      if (c != ' ' && c != '\t') return false;
    }
    return true;
  }

  void apply_leading(std::string& data) {
    if (strip_next_) {
      size_t k = 0;
      while (k < data.size() && is_ws(data[k])) ++k;
      data.erase(0, k);
    } else if (trim_next_ && !data.empty() && data[0] == '\n') {
      data.erase(0, 1);
    }
    strip_next_ = trim_next_ = false;
  }

  void emit_data(std::string data) {
    if (!data.empty()) tokens_.push_back(Token{Tok::Data, std::move(data), 0, 0, line_at(pos_)});
  }

  int line_at(size_t pos) {
    for (; line_pos_ < pos && line_pos_ < src_.size(); ++line_pos_)
      line_ += src_[line_pos_] == '\n';
    return line_;
  }

  void comment(size_t p) {
    size_t end = src_.find("#}", p);
    if (end == std::string::npos) fail("Missing end of comment tag");
    bool minus = end > p && src_[end - 1] == '-';
    pos_ = end + 2;
    strip_next_ = minus;
    trim_next_ = !minus && opt_.trim_blocks;
  }

  // `{% raw %}…{% endraw %}`: the body is data, verbatim. Returns false when the tag is not raw.
  bool raw_block(size_t p) {
    size_t q = p;
    while (q < src_.size() && is_ws(src_[q])) ++q;
    if (src_.compare(q, 3, "raw") != 0) return false;
    q += 3;
    while (q < src_.size() && is_ws(src_[q])) ++q;
    bool minus = q < src_.size() && src_[q] == '-';
    if (minus) ++q;
    if (src_.compare(q, 2, "%}") != 0) return false;
    size_t body = q + 2;
    if (minus) {
      while (body < src_.size() && is_ws(src_[body])) ++body;
    }
    for (size_t i = src_.find("{%", body); i != std::string::npos; i = src_.find("{%", i + 2)) {
      size_t k = i + 2;
      bool lead_minus = k < src_.size() && src_[k] == '-';
      if (lead_minus || (k < src_.size() && src_[k] == '+')) ++k;
      while (k < src_.size() && is_ws(src_[k])) ++k;
      if (src_.compare(k, 6, "endraw") != 0) continue;
      k += 6;
      while (k < src_.size() && is_ws(src_[k])) ++k;
      bool end_minus = k < src_.size() && src_[k] == '-';
      if (end_minus) ++k;
      if (src_.compare(k, 2, "%}") != 0) continue;
      std::string text = src_.substr(body, i - body);
      if (lead_minus) rstrip_ws(text);
      pos_ = body;
      emit_data(std::move(text));
      pos_ = k + 2;
      strip_next_ = end_minus;
      trim_next_ = !end_minus && opt_.trim_blocks;
      return true;
    }
    fail("Missing end of raw directive");
  }

  // Tokens of one {{ … }} or {% … %} tag.
  void tag(char kind, size_t p, size_t start) {
    bool block = kind == '%';
    tokens_.push_back(Token{block ? Tok::BlockBegin : Tok::VarBegin, "", 0, 0, line_at(start)});
    std::vector<char> balance;
    char close = block ? '%' : '}';
    for (;;) {
      while (p < src_.size() && is_ws(src_[p])) ++p;
      if (p >= src_.size()) {
        fail("unexpected end of template, expected '",
             block ? "end of statement block" : "end of print statement", "'.");
      }
      if (balance.empty()) {
        bool minus = src_[p] == '-' && src_.compare(p + 1, 2, std::string{close, '}'}) == 0;
        bool plus = block && src_[p] == '+' && src_.compare(p + 1, 2, "%}") == 0;
        if (minus || plus || src_.compare(p, 2, std::string{close, '}'}) == 0) {
          tokens_.push_back(Token{block ? Tok::BlockEnd : Tok::VarEnd, "", 0, 0, line_at(p)});
          pos_ = p + 2 + (minus || plus ? 1 : 0);
          strip_next_ = minus;
          trim_next_ = block && !minus && !plus && opt_.trim_blocks;
          return;
        }
      }
      p = expression_token(p, balance, start);
    }
  }

  size_t expression_token(size_t p, std::vector<char>& balance, size_t tag_start) {
    char c = src_[p];
    int line = line_at(p);
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t e = p;
      while (e < src_.size() &&
             (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_'))
        ++e;
      tokens_.push_back(Token{Tok::Name, src_.substr(p, e - p), 0, 0, line});
      return e;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return number(p, line);
    if (c == '\'' || c == '"') {
      size_t e = p + 1;
      while (e < src_.size() && src_[e] != c) e += src_[e] == '\\' ? 2 : 1;
      if (e >= src_.size())
        fail("unexpected char ", string_repr(std::string(1, c)), " at ", p - tag_start);
      tokens_.push_back(
          Token{Tok::String, decode_string_literal(src_.substr(p + 1, e - p - 1)), 0, 0, line});
      return e + 1;
    }
    static const char* kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : kTwo) {
      if (src_.compare(p, 2, op) == 0) {
        tokens_.push_back(Token{Tok::Op, op, 0, 0, line});
        return p + 2;
      }
    }
    if (std::string_view("+-*/%~<>=()[]{},.:|;").find(c) == std::string_view::npos)
      fail("unexpected char ", string_repr(std::string(1, c)), " at ", p - tag_start);
    if (c == '(' || c == '[' || c == '{') balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) fail("unexpected '", std::string(1, c), "'");
      if (balance.back() != c)
        fail("unexpected '", std::string(1, c), "', expected '", std::string(1, balance.back()),
             "'");
      balance.pop_back();
    }
    tokens_.push_back(Token{Tok::Op, std::string(1, c), 0, 0, line});
    return p + 1;
  }

  size_t number(size_t p, int line) {
    auto digits = [&](size_t q) {
      while (q < src_.size() &&
             (std::isdigit(static_cast<unsigned char>(src_[q])) || src_[q] == '_'))
        ++q;
      return q;
    };
    size_t e = digits(p);
    bool is_float = false;
    bool after_dot = p > 0 && src_[p - 1] == '.';  // `x.0.1` is two subscripts, not a float
    if (!after_dot && e + 1 < src_.size() && src_[e] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      e = digits(e + 1);
      is_float = true;
    }
    if (!after_dot && e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t q = e + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && std::isdigit(static_cast<unsigned char>(src_[q]))) {
        e = digits(q);
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = p; i < e; ++i) {
      if (src_[i] != '_') text.push_back(src_[i]);
    }
    Token t{is_float ? Tok::Float : Tok::Integer, text, 0, 0, line};
    if (is_float) {
      t.float_value = std::strtod(text.c_str(), nullptr);  // underflow/overflow → 0/inf as Python
    } else {
      errno = 0;
      t.int_value = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE)
        fail("integer literal ", text, " is beyond the 64-bit range this interpreter supports");
    }
    tokens_.push_back(std::move(t));
    return e;
  }

  std::string src_;
  LexOptions opt_;
  size_t pos_ = 0;
  bool strip_next_ = false;
  bool trim_next_ = false;
  size_t line_pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexOptions& options) {
  std::string text = normalize_newlines(source);
  if (!options.keep_trailing_newline && !text.empty() && text.back() == '\n') text.pop_back();
  return Lexer(std::move(text), options).run();
}

}  // namespace sluice::jinja
