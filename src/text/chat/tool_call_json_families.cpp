// The grammars whose arguments are a JSON object between family markers: Hermes/Qwen
// (<tool_call>), Llama 3 (bare JSON, <|python_tag|>), Mistral ([TOOL_CALLS]), DeepSeek V3/R1/V3.1
// (<｜tool▁call▁begin｜>) and Kimi K2 (<|tool_call_begin|>). Formats are as the families'
// chat templates render past calls, since that is what the models were trained to emit.
#include <cctype>

#include "text/chat/tool_call_support.h"

namespace sluice::text::tool_call_detail {

namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

bool is_identifier_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.';
}

// Strips a ```json … ``` (or bare ```) fence, as DeepSeek V3/R1 wrap their arguments.
std::string_view strip_code_fence(std::string_view text) {
  auto body = trim(text);
  if (!body.starts_with("```")) return body;
  const auto newline = body.find('\n');
  if (newline == std::string_view::npos) return body;
  body = body.substr(newline + 1);
  body = trim(body);
  if (body.ends_with("```")) body = body.substr(0, body.size() - 3);
  return trim(body);
}

// One of Llama 3.1's built-in tools: name.call(key="value", n=3).
bool parse_builtin_call(std::string_view text, MessageBuilder& out) {
  const auto open = text.find(".call(");
  if (open == std::string_view::npos || !text.ends_with(")")) return false;
  const auto name = text.substr(0, open);
  for (const char c : name) {
    if (!is_identifier_char(c)) return false;
  }
  auto args_text = text.substr(open + 6, text.size() - open - 7);
  Json args = Json::object();
  while (!(args_text = trim(args_text)).empty()) {
    const auto eq = args_text.find('=');
    if (eq == std::string_view::npos) return false;
    const auto key = std::string(trim(args_text.substr(0, eq)));
    auto rest = trim(args_text.substr(eq + 1));
    std::size_t value_end = 0;
    if (!rest.empty() && (rest[0] == '"' || rest[0] == '\'')) {
      const char quote = rest[0];
      value_end = 1;
      while (value_end < rest.size() && rest[value_end] != quote)
        value_end += rest[value_end] == '\\' ? 2 : 1;
      if (value_end >= rest.size()) return false;
      ++value_end;
      const auto quoted = rest.substr(0, value_end);
      auto value = quote == '"' ? parse_json(quoted) : std::nullopt;
      args[key] = value ? *value : Json(std::string(quoted.substr(1, quoted.size() - 2)));
    } else {
      value_end = std::min(rest.find(','), rest.size());
      const auto bare = trim(rest.substr(0, value_end));
      auto value = parse_json(bare);
      args[key] = value ? *value : Json(std::string(bare));
    }
    rest = trim(rest.substr(value_end));
    if (!rest.empty() && rest[0] != ',') return false;
    args_text = rest.empty() ? rest : rest.substr(1);
  }
  out.call(std::string(name), args, "", text);
  return true;
}

// Whether a '{' at text[pos] opens what looks like a Llama 3 call: {"name": … or
// {"type": "function", …. Other braces are ordinary content.
bool looks_like_json_call(std::string_view text, std::size_t pos) {
  const auto rest = trim(text.substr(pos + 1));
  return rest.starts_with("\"name\"") || rest.starts_with("\"type\"") ||
         rest.starts_with("\"function\"");
}

// Bare JSON calls anywhere in the text, separated by whitespace, ';' or prose.
void scan_json_calls(std::string_view text, MessageBuilder& out) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto brace = text.find('{', pos);
    while (brace != std::string_view::npos && !looks_like_json_call(text, brace))
      brace = text.find('{', brace + 1);
    if (brace == std::string_view::npos) break;
    out.content(text.substr(pos, brace - pos));
    const auto end = json_container_end(text, brace);
    if (end == std::string_view::npos) {
      out.malformed(text.substr(brace), "unterminated JSON tool call");
      return;
    }
    const auto raw = text.substr(brace, end - brace);
    std::string error;
    if (auto value = parse_json(raw, &error)) {
      call_from_object(*value, raw, out);
    } else {
      out.malformed(raw, "invalid JSON tool call (" + error + ")");
    }
    pos = end;
    // A separator between consecutive calls is not content.
    const auto next = text.find_first_not_of(" \t\r\n;", pos);
    if (next != std::string_view::npos && text[next] == '{') pos = next;
  }
  out.content(text.substr(std::min(pos, text.size())));
}

}  // namespace

void parse_hermes(std::string_view text, MessageBuilder& out) {
  const auto rest = split_reasoning(text, kThinkOpen, kThinkClose, out);
  scan_blocks(rest, "<tool_call>", "</tool_call>", out,
              [](std::string_view body, std::string_view raw, MessageBuilder& b) {
                const auto json = trim(body);
                // Qwen3.5 and Qwen3-Coder write the XML body inside the same tags; accept either
                // here.
                if (json.starts_with("<function=")) return parse_qwen3_coder_body(body, raw, b);
                std::string error;
                if (auto value = parse_json(json, &error)) return call_from_object(*value, raw, b);
                b.malformed(raw, "invalid JSON in <tool_call> (" + error + ")");
              });
}

void parse_llama3(std::string_view text, MessageBuilder& out) {
  constexpr std::string_view kPythonTag = "<|python_tag|>";
  const auto tag = text.find(kPythonTag);
  if (tag == std::string_view::npos) return scan_json_calls(text, out);
  scan_json_calls(text.substr(0, tag), out);
  const auto body = trim(text.substr(tag + kPythonTag.size()));
  if (body.starts_with("{")) return scan_json_calls(body, out);
  if (parse_builtin_call(body, out)) return;
  // Llama 3.1's code interpreter: the tag is followed by plain Python to run.
  if (body.empty()) return out.malformed(text.substr(tag), "empty <|python_tag|> call");
  out.call("python", Json{{"code", std::string(body)}}, "", body);
}

void parse_mistral(std::string_view text, MessageBuilder& out) {
  constexpr std::string_view kCalls = "[TOOL_CALLS]";
  constexpr std::string_view kArgs = "[ARGS]";
  constexpr std::string_view kCallId = "[CALL_ID]";
  auto rest = split_reasoning(text, "[THINK]", "[/THINK]", out);
  auto start = rest.find(kCalls);
  if (start == std::string_view::npos) return out.content(rest);
  out.content(rest.substr(0, start));
  rest = rest.substr(start);
  while (rest.starts_with(kCalls)) {
    auto body = rest.substr(kCalls.size());
    const auto lead = body.find_first_not_of(" \t\r\n");
    if (lead != std::string_view::npos && body[lead] == '[') {
      // Nemo: one JSON array of {"name", "arguments", "id"} objects.
      const auto end = json_container_end(body, lead);
      if (end == std::string_view::npos)
        return out.malformed(rest, "unterminated [TOOL_CALLS] array");
      const auto raw = body.substr(lead, end - lead);
      std::string error;
      auto value = parse_json(raw, &error);
      if (!value || !value->is_array()) {
        out.malformed(raw, "invalid [TOOL_CALLS] JSON array (" + error + ")");
      } else {
        for (const auto& item : *value) call_from_object(item, raw, out);
      }
      rest = trim(body.substr(end));
      continue;
    }
    // Small 3.2 / Devstral / Ministral 3: name[CALL_ID]id[ARGS]{…}, the prefix repeated per call.
    const auto args = body.find(kArgs);
    if (args == std::string_view::npos) return out.malformed(rest, "[TOOL_CALLS] without [ARGS]");
    auto name = body.substr(0, args);
    std::string id;
    if (const auto id_pos = name.find(kCallId); id_pos != std::string_view::npos) {
      id = std::string(trim(name.substr(id_pos + kCallId.size())));
      name = name.substr(0, id_pos);
    }
    const auto json_start = body.find_first_not_of(" \t\r\n", args + kArgs.size());
    const auto end =
        json_start == std::string_view::npos ? json_start : json_container_end(body, json_start);
    if (end == std::string_view::npos) return out.malformed(rest, "unterminated [ARGS] JSON");
    const auto raw = rest.substr(0, kCalls.size() + end);
    out.call_from_text(std::string(name), body.substr(json_start, end - json_start), std::move(id),
                       raw);
    rest = trim(body.substr(end));
  }
  out.content(rest);
}

void parse_deepseek_v3(std::string_view text, MessageBuilder& out) {
  const auto rest = split_reasoning(text, kThinkOpen, kThinkClose, out);
  scan_blocks(rest, "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", out,
              [](std::string_view section, std::string_view, MessageBuilder& b) {
                scan_blocks(section, "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", b,
                            [](std::string_view body, std::string_view raw, MessageBuilder& c) {
                              constexpr std::string_view kSep = "<｜tool▁sep｜>";
                              const auto sep = body.find(kSep);
                              if (sep == std::string_view::npos)
                                return c.malformed(raw, "call without <｜tool▁sep｜>");
                              const auto head = trim(body.substr(0, sep));
                              auto tail = body.substr(sep + kSep.size());
                              if (head == "function") {
                                // V3 / R1: the type, then "name\n```json\n{…}\n```".
                                const auto newline = tail.find('\n');
                                if (newline == std::string_view::npos) {
                                  return c.malformed(raw, "call without arguments after the name");
                                }
                                return c.call_from_text(std::string(tail.substr(0, newline)),
                                                        strip_code_fence(tail.substr(newline + 1)),
                                                        "", raw);
                              }
                              // V3.1: "name<｜tool▁sep｜>{…}".
                              c.call_from_text(std::string(head), strip_code_fence(tail), "", raw);
                            });
              });
}

void parse_kimi_k2(std::string_view text, MessageBuilder& out) {
  const auto rest = split_reasoning(text, kThinkOpen, kThinkClose, out);
  scan_blocks(rest, "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", out,
              [](std::string_view section, std::string_view, MessageBuilder& b) {
                scan_blocks(
                    section, "<|tool_call_begin|>", "<|tool_call_end|>", b,
                    [](std::string_view body, std::string_view raw, MessageBuilder& c) {
                      constexpr std::string_view kArgs = "<|tool_call_argument_begin|>";
                      const auto args = body.find(kArgs);
                      if (args == std::string_view::npos) {
                        return c.malformed(raw, "call without <|tool_call_argument_begin|>");
                      }
                      // The id is "functions.<name>:<index>"; the name sits between.
                      const auto id = trim(body.substr(0, args));
                      auto name = id;
                      if (name.starts_with("functions.")) name.remove_prefix(10);
                      if (const auto colon = name.rfind(':'); colon != std::string_view::npos) {
                        name = name.substr(0, colon);
                      }
                      c.call_from_text(std::string(name), body.substr(args + kArgs.size()),
                                       std::string(id), raw);
                    });
              });
}

}  // namespace sluice::text::tool_call_detail
