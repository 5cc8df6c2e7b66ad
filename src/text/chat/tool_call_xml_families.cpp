// The grammars that spell each argument as its own XML-ish element with a bare value: GLM-4.5+
// and Laguna (<arg_key>/<arg_value>), Qwen3-Coder (<parameter=k>), and the invoke/parameter
// family shared by DeepSeek V3.2/V4 (DSML), MiniMax-M2 and Muse's ATEM blocks. Values are typed
// by the tool schema when given (tool_call_support.h, typed_parameter).
#include <algorithm>

#include "text/chat/tool_call_support.h"

namespace sluice::text::tool_call_detail {

namespace {

// The tags of one invoke/parameter grammar. `block_*` wrap a group of calls; `invoke` and
// `parameter` open with attributes (name="…", and DSML's string="true|false").
struct InvokeGrammar {
  std::string_view block_open;
  std::string_view block_close;
  std::string_view invoke_open;  // without the closing '>': attributes follow
  std::string_view invoke_close;
  std::string_view param_open;
  std::string_view param_close;
};

// Reads the parameters of one <invoke …>…</invoke> body (starting just after the tag name).
void parse_invoke(const InvokeGrammar& g, std::string_view body, std::string_view raw,
                  MessageBuilder& out) {
  const auto tag_end = body.find('>');
  if (tag_end == std::string_view::npos) return out.malformed(raw, "invoke tag without '>'");
  const auto name = xml_attribute(body.substr(0, tag_end), "name");
  if (!name) return out.malformed(raw, "invoke without a name attribute");
  Json args = Json::object();
  auto rest = body.substr(tag_end + 1);
  while (true) {
    const auto open = rest.find(g.param_open);
    if (open == std::string_view::npos) break;
    if (!trim(rest.substr(0, open)).empty())
      return out.malformed(raw, "unexpected text between parameters");
    const auto attrs_end = rest.find('>', open);
    if (attrs_end == std::string_view::npos) return out.malformed(raw, "parameter tag without '>'");
    const auto attrs =
        rest.substr(open + g.param_open.size(), attrs_end - open - g.param_open.size());
    const auto key = xml_attribute(attrs, "name");
    if (!key) return out.malformed(raw, "parameter without a name attribute");
    const auto close = rest.find(g.param_close, attrs_end + 1);
    if (close == std::string_view::npos)
      return out.malformed(raw, "unterminated parameter '" + *key + "'");
    const auto value = rest.substr(attrs_end + 1, close - attrs_end - 1);
    const auto is_string = xml_attribute(attrs, "string");
    if (is_string && *is_string == "true") {
      args[*key] = std::string(value);
    } else if (is_string && *is_string == "false") {
      // DSML promises JSON here; a value that is not JSON is a malformed call, not a string.
      std::string error;
      auto parsed = parse_json(value, &error);
      if (!parsed)
        return out.malformed(raw, "parameter '" + *key + "' marked string=\"false\" is not JSON");
      args[*key] = std::move(*parsed);
    } else {
      args[*key] = typed_parameter(out.options(), *name, *key, value);
    }
    rest = rest.substr(close + g.param_close.size());
  }
  if (!trim(rest).empty()) return out.malformed(raw, "unexpected text after the parameters");
  out.call(*name, args, "", raw);
}

void parse_invoke_blocks(const InvokeGrammar& g, std::string_view text, MessageBuilder& out) {
  scan_blocks(text, g.block_open, g.block_close, out,
              [&g](std::string_view block, std::string_view, MessageBuilder& b) {
                scan_blocks(block, g.invoke_open, g.invoke_close, b,
                            [&g](std::string_view body, std::string_view raw, MessageBuilder& c) {
                              parse_invoke(g, body, raw, c);
                            });
              });
}

constexpr InvokeGrammar kDsmlFunctionCalls{"<｜DSML｜function_calls>", "</｜DSML｜function_calls>",
                                           "<｜DSML｜invoke",          "</｜DSML｜invoke>",
                                           "<｜DSML｜parameter",       "</｜DSML｜parameter>"};
constexpr InvokeGrammar kDsmlToolCalls{"<｜DSML｜tool_calls>", "</｜DSML｜tool_calls>",
                                       "<｜DSML｜invoke",      "</｜DSML｜invoke>",
                                       "<｜DSML｜parameter",   "</｜DSML｜parameter>"};
constexpr InvokeGrammar kMiniMax{"<minimax:tool_call>", "</minimax:tool_call>", "<invoke",
                                 "</invoke>",           "<parameter",           "</parameter>"};
constexpr InvokeGrammar kAtem{"<atem:function_calls>", "</atem:function_calls>",
                              "<atem:invoke",          "</atem:invoke>",
                              "<atem:parameter",       "</atem:parameter>"};

// Qwen3-Coder writes each value on its own lines: "<parameter=k>\nvalue\n</parameter>".
std::string_view strip_one_newline(std::string_view value) {
  if (value.starts_with("\n")) value.remove_prefix(1);
  if (value.ends_with("\n")) value.remove_suffix(1);
  return value;
}

}  // namespace

void parse_qwen3_coder_body(std::string_view body, std::string_view raw, MessageBuilder& out) {
  constexpr std::string_view kFunction = "<function=";
  constexpr std::string_view kParam = "<parameter=";
  constexpr std::string_view kParamClose = "</parameter>";
  constexpr std::string_view kFunctionClose = "</function>";
  auto rest = trim(body);
  if (!rest.starts_with(kFunction)) return out.malformed(raw, "<tool_call> without <function=…>");
  const auto name_end = rest.find('>');
  if (name_end == std::string_view::npos) return out.malformed(raw, "<function= without '>'");
  const auto name = std::string(rest.substr(kFunction.size(), name_end - kFunction.size()));
  rest = rest.substr(name_end + 1);
  // Models often drop </parameter> or </function>; a value then runs to the next tag.
  if (const auto fn_close = rest.rfind(kFunctionClose); fn_close != std::string_view::npos) {
    if (!trim(rest.substr(fn_close + kFunctionClose.size())).empty()) {
      return out.malformed(raw, "unexpected text after </function>");
    }
    rest = rest.substr(0, fn_close);
  }
  Json args = Json::object();
  while (!trim(rest).empty()) {
    const auto open = rest.find(kParam);
    if (open == std::string_view::npos || !trim(rest.substr(0, open)).empty()) {
      return out.malformed(raw, "unexpected text between parameters");
    }
    const auto key_end = rest.find('>', open);
    if (key_end == std::string_view::npos) return out.malformed(raw, "<parameter= without '>'");
    const auto key = std::string(rest.substr(open + kParam.size(), key_end - open - kParam.size()));
    rest = rest.substr(key_end + 1);
    const auto close = rest.find(kParamClose);
    const auto next = rest.find(kParam);
    const auto stop = std::min(close, next);
    const auto value = strip_one_newline(rest.substr(0, std::min(stop, rest.size())));
    args[key] = typed_parameter(out.options(), name, key, value);
    if (stop == std::string_view::npos) break;
    rest = rest.substr(stop == close ? close + kParamClose.size() : next);
  }
  out.call(name, args, "", raw);
}

void parse_glm45(std::string_view text, MessageBuilder& out) {
  auto rest = split_reasoning(text, "<think>", "</think>", out);
  scan_blocks(
      rest, "<tool_call>", "</tool_call>", out,
      [](std::string_view body, std::string_view raw, MessageBuilder& b) {
        body.remove_prefix(std::min(body.size(), body.find_first_not_of(" \t\r\n")));
        constexpr std::string_view kKey = "<arg_key>", kKeyClose = "</arg_key>";
        constexpr std::string_view kValue = "<arg_value>", kValueClose = "</arg_value>";
        // The name runs to the end of its line, or to the first <arg_key> (GLM-4.7 has no
        // newlines).
        const auto name_end = std::min({body.find('\n'), body.find(kKey), body.size()});
        const auto name = std::string(trim(body.substr(0, name_end)));
        if (name.starts_with("{"))
          return b.malformed(raw, "JSON body where GLM expects name and <arg_key>s");
        Json args = Json::object();
        auto args_text = body.substr(name_end);
        while (!trim(args_text).empty()) {
          const auto key_open = args_text.find(kKey);
          if (key_open == std::string_view::npos || !trim(args_text.substr(0, key_open)).empty()) {
            return b.malformed(raw, "unexpected text between arguments");
          }
          const auto key_close = args_text.find(kKeyClose, key_open);
          if (key_close == std::string_view::npos)
            return b.malformed(raw, "unterminated <arg_key>");
          const auto key = std::string(
              trim(args_text.substr(key_open + kKey.size(), key_close - key_open - kKey.size())));
          const auto after_key = args_text.substr(key_close + kKeyClose.size());
          const auto value_open = after_key.find(kValue);
          if (value_open == std::string_view::npos ||
              !trim(after_key.substr(0, value_open)).empty()) {
            return b.malformed(raw, "<arg_key>" + key + " without <arg_value>");
          }
          const auto value_close = after_key.find(kValueClose, value_open);
          if (value_close == std::string_view::npos)
            return b.malformed(raw, "unterminated <arg_value>");
          const auto value = after_key.substr(value_open + kValue.size(),
                                              value_close - value_open - kValue.size());
          args[key] = typed_parameter(b.options(), name, key, value);
          args_text = after_key.substr(value_close + kValueClose.size());
        }
        b.call(name, args, "", raw);
      });
}

void parse_deepseek_dsml(std::string_view text, MessageBuilder& out) {
  const auto rest = split_reasoning(text, "<think>", "</think>", out);
  // V3.2 wraps calls in function_calls, V4 in tool_calls; accept whichever the model wrote.
  const bool v4 = rest.find(kDsmlToolCalls.block_open) != std::string_view::npos;
  parse_invoke_blocks(v4 ? kDsmlToolCalls : kDsmlFunctionCalls, rest, out);
}

void parse_minimax_m2(std::string_view text, MessageBuilder& out) {
  parse_invoke_blocks(kMiniMax, split_reasoning(text, "<think>", "</think>", out), out);
}

// Muse's ATEM body: the calls inside one tool-addressed message (see
// tool_call_channel_families.cpp).
void parse_atem_blocks(std::string_view text, MessageBuilder& out) {
  parse_invoke_blocks(kAtem, text, out);
}

}  // namespace sluice::text::tool_call_detail
