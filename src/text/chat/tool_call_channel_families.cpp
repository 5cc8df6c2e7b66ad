// The grammars built from addressed messages rather than inline markers: gpt-oss harmony
// (<|channel|>analysis|commentary|final, to=functions.name) and Muse's ATEM channels (to=self,
// to=<tool>, to=user), plus Gemma 4 (<|channel>thought…<channel|>, <|tool_call>call:…) with
// its own non-JSON argument syntax.
#include <algorithm>
#include <initializer_list>

#include "text/chat/tool_call_support.h"

namespace sluice::text::tool_call_detail {

namespace {

constexpr std::string_view kMessage = "<|message|>";

// The word after `key` in a message header ("<|channel|>analysis", "to=functions.f"), up to
// whitespace or the next special token.
std::string_view header_word(std::string_view header, std::string_view key) {
  const auto at = header.find(key);
  if (at == std::string_view::npos) return {};
  const auto rest = header.substr(at + key.size());
  const auto end = std::min(rest.find_first_of(" \t\r\n<"), rest.size());
  return rest.substr(0, end);
}

struct ChannelMessage {
  std::string_view header;  // role, channel, recipient: everything before <|message|>
  std::string_view body;
  std::string_view raw;
};

// Splits `text` into header<|message|>body<terminator> messages. The prompt ends inside the
// first header ("<|start|>assistant"), so the output opens mid-header; a message cut off by
// the end of generation (its stop token is not part of the text) runs to the end.
template <class OnMessage>
void for_each_message(std::string_view text, std::initializer_list<std::string_view> header_starts,
                      std::initializer_list<std::string_view> terminators, MessageBuilder& out,
                      OnMessage on_message) {
  constexpr std::string_view kStart = "<|start|>";
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto m = text.find(kMessage, pos);
    if (m == std::string_view::npos) {
      const auto tail = text.substr(pos);
      bool header_like = false;
      for (const auto h : header_starts)
        header_like = header_like || tail.find(h) != std::string_view::npos;
      if (header_like)
        out.malformed(tail, "message header without <|message|>");
      else
        out.content(tail);
      return;
    }
    // Prose before the header (a model that skipped the structure) is plain content.
    auto header_at = m;
    for (const auto h : header_starts) header_at = std::min(header_at, text.find(h, pos));
    out.content(text.substr(pos, header_at - pos));
    const auto body_start = m + kMessage.size();
    auto stop = text.find(kStart, body_start);
    auto stop_len = std::size_t{0};  // the next <|start|> belongs to the next message
    for (const auto t : terminators) {
      const auto at = text.find(t, body_start);
      if (at < stop) stop = at, stop_len = t.size();
    }
    const auto end = stop == std::string_view::npos ? text.size() : stop;
    const auto next = stop == std::string_view::npos ? text.size() : stop + stop_len;
    on_message(ChannelMessage{text.substr(header_at, m - header_at),
                              text.substr(body_start, end - body_start),
                              text.substr(header_at, next - header_at)});
    pos = next;
  }
}

// Recursive descent over Gemma 4's value syntax; depth-limited so garbage cannot overflow.
class GemmaValueParser {
 public:
  explicit GemmaValueParser(std::string_view text) : text_(text) {}

  std::optional<Json> parse_all(std::string& error) {
    auto value = parse_value(0);
    skip_space();
    if (value && pos_ != text_.size()) error_ = "unexpected text after the value";
    if (!error_.empty()) {
      error = error_ + " at byte " + std::to_string(pos_);
      return std::nullopt;
    }
    return value;
  }

 private:
  static constexpr std::string_view kQuote = "<|\"|>";
  static constexpr int kMaxDepth = 256;

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\t' || text_[pos_] == '\r'))
      ++pos_;
  }
  bool fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    return false;
  }

  std::optional<std::string> parse_quoted() {
    pos_ += kQuote.size();
    const auto end = text_.find(kQuote, pos_);
    if (end == std::string_view::npos) return fail("unterminated <|\"|> string"), std::nullopt;
    std::string s(text_.substr(pos_, end - pos_));
    pos_ = end + kQuote.size();
    return s;
  }

  std::optional<Json> parse_value(int depth) {
    if (depth > kMaxDepth) return fail("nesting too deep"), std::nullopt;
    skip_space();
    if (pos_ >= text_.size()) return fail("missing value"), std::nullopt;
    if (text_.substr(pos_).starts_with(kQuote)) {
      auto s = parse_quoted();
      return s ? std::optional<Json>(Json(std::move(*s))) : std::nullopt;
    }
    const char c = text_[pos_];
    if (c == '{') return parse_container(depth, '}');
    if (c == '[') return parse_container(depth, ']');
    if (c == '"') {  // tolerate a plain JSON string
      auto end = pos_ + 1;
      while (end < text_.size() && text_[end] != '"') end += text_[end] == '\\' ? 2 : 1;
      if (end >= text_.size()) return fail("unterminated string"), std::nullopt;
      auto s = parse_json(text_.substr(pos_, end + 1 - pos_));
      if (!s) return fail("invalid string"), std::nullopt;
      pos_ = end + 1;
      return s;
    }
    const auto start = pos_;
    while (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != '}' && text_[pos_] != ']')
      ++pos_;
    const auto bare = trim(text_.substr(start, pos_ - start));
    if (bare.empty()) return fail("missing value"), std::nullopt;
    if (auto literal = parse_json(bare)) return literal;
    return Json(std::string(bare));
  }

  // An object ({key:value,…}, keys bare or <|"|>-quoted) or an array ([v,…]).
  std::optional<Json> parse_container(int depth, char close) {
    ++pos_;
    Json out = close == '}' ? Json::object() : Json::array();
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == close) return ++pos_, out;
    while (true) {
      skip_space();
      if (close == '}') {
        std::string key;
        if (text_.substr(pos_).starts_with(kQuote)) {
          auto quoted = parse_quoted();
          if (!quoted) return std::nullopt;
          key = std::move(*quoted);
        } else {
          const auto colon = text_.find(':', pos_);
          if (colon == std::string_view::npos) return fail("object key without ':'"), std::nullopt;
          key = std::string(trim(text_.substr(pos_, colon - pos_)));
          pos_ = colon;
        }
        skip_space();
        if (pos_ >= text_.size() || text_[pos_] != ':')
          return fail("object key without ':'"), std::nullopt;
        ++pos_;
        auto value = parse_value(depth + 1);
        if (!value) return std::nullopt;
        out[key] = std::move(*value);
      } else {
        auto value = parse_value(depth + 1);
        if (!value) return std::nullopt;
        out.push_back(std::move(*value));
      }
      skip_space();
      if (pos_ >= text_.size()) return fail(std::string("missing '") + close + "'"), std::nullopt;
      if (text_[pos_] == close) return ++pos_, out;
      if (text_[pos_] != ',')
        return fail("expected ',' or '" + std::string(1, close) + "'"), std::nullopt;
      ++pos_;
    }
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  std::string error_;
};

}  // namespace

std::optional<Json> parse_gemma4_value(std::string_view text, std::string& error) {
  return GemmaValueParser(text).parse_all(error);
}

void parse_gpt_oss(std::string_view text, MessageBuilder& out) {
  for_each_message(text, {"<|start|>", "<|channel|>"}, {"<|end|>", "<|call|>", "<|return|>"}, out,
                   [&out](const ChannelMessage& m) {
                     const auto recipient = header_word(m.header, "to=");
                     const auto channel = header_word(m.header, "<|channel|>");
                     if (!recipient.empty() && recipient != "assistant" && recipient != "user") {
                       auto name = recipient;
                       if (name.starts_with("functions.")) name.remove_prefix(10);
                       return out.call_from_text(std::string(name), m.body, "", m.raw);
                     }
                     if (channel == "analysis") return out.reasoning(m.body);
                     // final, and commentary addressed to no tool (a preamble to the user).
                     out.content(m.body);
                   });
}

void parse_muse(std::string_view text, MessageBuilder& out) {
  for_each_message(text, {"<|start|>", "to="}, {"<|eom|>", "<|eot|>", "<|end|>"}, out,
                   [&out](const ChannelMessage& m) {
                     const auto recipient = header_word(m.header, "to=");
                     if (recipient == "self") return out.reasoning(m.body);
                     if (recipient.empty() || recipient == "user")
                       return parse_atem_blocks(m.body, out);
                     if (m.body.find("<atem:function_calls>") == std::string_view::npos) {
                       return out.malformed(m.raw, "message to '" + std::string(recipient) +
                                                       "' without <atem:function_calls>");
                     }
                     parse_atem_blocks(m.body, out);
                   });
}

void parse_gemma4(std::string_view text, MessageBuilder& out) {
  constexpr std::string_view kOpen = "<|channel>", kClose = "<channel|>";
  auto rest = text;
  const auto lead = rest.find_first_not_of(" \t\r\n");
  if (lead != std::string_view::npos && rest.substr(lead).starts_with(kOpen)) {
    auto inner = rest.substr(lead + kOpen.size());
    const auto stop = inner.find(kClose);
    rest = stop == std::string_view::npos ? std::string_view{} : inner.substr(stop + kClose.size());
    inner = inner.substr(0, std::min(stop, inner.size()));
    // The channel is named on its first line ("thought").
    if (inner.starts_with("thought")) inner.remove_prefix(7);
    out.reasoning(inner);
  }
  scan_blocks(rest, "<|tool_call>", "<tool_call|>", out,
              [](std::string_view body, std::string_view raw, MessageBuilder& b) {
                const auto call = trim(body);
                if (!call.starts_with("call:"))
                  return b.malformed(raw, "<|tool_call> without 'call:'");
                const auto brace = call.find('{');
                if (brace == std::string_view::npos)
                  return b.malformed(raw, "<|tool_call> without '{' arguments");
                std::string error;
                auto args = parse_gemma4_value(call.substr(brace), error);
                if (!args) return b.malformed(raw, "invalid arguments (" + error + ")");
                b.call(std::string(call.substr(5, brace - 5)), *args, "", raw);
              });
}

}  // namespace sluice::text::tool_call_detail
