// Shared machinery of the tool-call parsers: the message builder (malformed parts go back into
// content with an error line), non-throwing JSON helpers, the block scanner, reasoning split
// and schema-aware typing of bare parameter values. No family-specific grammar lives here.
#include "text/chat/tool_call_support.h"

#include <algorithm>

namespace sluice::text::tool_call_detail {

namespace {

// Beyond this nesting a value is refused: dumping nests the C++ stack once per level, and no
// real tool argument comes near it.
constexpr int kMaxJsonDepth = 512;

std::string snippet(std::string_view raw) {
  constexpr std::size_t kMax = 60;
  std::string out(raw.substr(0, kMax));
  std::replace(out.begin(), out.end(), '\n', ' ');
  return raw.size() > kMax ? out + "…" : out;
}

// Deepest bracket nesting outside strings; used to refuse pathological input before parsing.
int max_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
}

// The declared JSON-schema type of one parameter, or nullptr when the tools do not say.
const nlohmann::json* schema_type(const nlohmann::json* tools, std::string_view function,
                                  std::string_view parameter) {
  if (tools == nullptr || !tools->is_array()) return nullptr;
  for (const auto& tool : *tools) {
    if (!tool.is_object()) continue;
    const auto fn_it = tool.find("function");
    const nlohmann::json& fn = (fn_it != tool.end() && fn_it->is_object()) ? *fn_it : tool;
    const auto name = fn.find("name");
    if (name == fn.end() || !name->is_string() || name->get_ref<const std::string&>() != function)
      continue;
    const auto params = fn.find("parameters");
    if (params == fn.end() || !params->is_object()) return nullptr;
    const auto props = params->find("properties");
    if (props == params->end() || !props->is_object()) return nullptr;
    const auto prop = props->find(std::string(parameter));
    if (prop == props->end() || !prop->is_object()) return nullptr;
    const auto type = prop->find("type");
    return type == prop->end() ? nullptr : &*type;
  }
  return nullptr;
}

bool declares_only_string(const nlohmann::json& type) {
  if (type.is_string()) return type.get_ref<const std::string&>() == "string";
  if (!type.is_array()) return false;
  bool has_string = false;
  for (const auto& t : type) {
    if (!t.is_string()) return false;
    const auto& name = t.get_ref<const std::string&>();
    if (name == "string")
      has_string = true;
    else if (name != "null")
      return false;
  }
  return has_string;
}

}  // namespace

std::string_view trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n";
  const auto first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kSpace) - first + 1);
}

void MessageBuilder::reasoning(std::string_view text) {
  const auto piece = trim(text);
  if (piece.empty()) return;
  if (!reasoning_.empty()) reasoning_ += "\n\n";
  reasoning_ += piece;
}

void MessageBuilder::malformed(std::string_view raw, std::string_view why) {
  content_ += raw;
  message_.errors.push_back(family_ + ": " + std::string(why) + ": " + snippet(raw));
}

void MessageBuilder::call(std::string name, const Json& arguments, std::string id,
                          std::string_view raw) {
  const auto clean_name = std::string(trim(name));
  if (clean_name.empty()) return malformed(raw, "tool call with an empty name");
  if (!arguments.is_object() && !arguments.is_null()) {
    return malformed(raw, "arguments of '" + clean_name + "' are not a JSON object");
  }
  ToolCall call;
  call.id = std::move(id);
  call.name = clean_name;
  call.arguments_json = arguments.is_null() ? "{}" : dump_json(arguments);
  message_.tool_calls.push_back(std::move(call));
}

void MessageBuilder::call_from_text(std::string name, std::string_view arguments, std::string id,
                                    std::string_view raw) {
  const auto text = trim(arguments);
  if (text.empty()) return call(std::move(name), Json::object(), std::move(id), raw);
  std::string error;
  auto value = parse_json(text, &error);
  if (!value) return malformed(raw, "invalid JSON arguments (" + error + ")");
  // Some models double-encode: "arguments": "{\"city\": \"Paris\"}".
  if (value->is_string()) {
    auto inner = parse_json(value->get_ref<const std::string&>(), &error);
    if (!inner) return malformed(raw, "arguments are a string that is not a JSON object");
    value = std::move(inner);
  }
  call(std::move(name), *value, std::move(id), raw);
}

ParsedAssistantMessage MessageBuilder::finish() {
  message_.content = std::string(trim(content_));
  message_.reasoning_content = reasoning_;
  return std::move(message_);
}

std::optional<Json> parse_json(std::string_view text, std::string* error) {
  if (max_depth(text) > kMaxJsonDepth) {
    if (error) *error = "nesting deeper than " + std::to_string(kMaxJsonDepth);
    return std::nullopt;
  }
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    // The parser's own message names the byte and what it expected; keep it for the report.
    if (error) *error = e.what();
    return std::nullopt;
  }
}

std::size_t json_container_end(std::string_view text, std::size_t pos) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = pos; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

std::string dump_json(const Json& value) {
  // replace: a model can emit invalid UTF-8 inside a string; that must not throw here.
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

void call_from_object(const Json& object, std::string_view raw, MessageBuilder& out) {
  if (!object.is_object()) return out.malformed(raw, "tool call is not a JSON object");
  const auto fn = object.find("function");
  if (fn != object.end() && fn->is_object() && !object.contains("name")) {
    Json merged = *fn;
    if (object.contains("id") && !merged.contains("id")) merged["id"] = object["id"];
    return call_from_object(merged, raw, out);
  }
  const auto name = object.find("name");
  if (name == object.end() || !name->is_string())
    return out.malformed(raw, "tool call without a \"name\" string");
  std::string id;
  if (const auto it = object.find("id"); it != object.end() && it->is_string())
    id = it->get<std::string>();
  auto args = object.find("arguments");
  if (args == object.end()) args = object.find("parameters");
  if (args == object.end())
    return out.call(name->get<std::string>(), Json::object(), std::move(id), raw);
  if (args->is_string())
    return out.call_from_text(name->get<std::string>(), args->get_ref<const std::string&>(),
                              std::move(id), raw);
  out.call(name->get<std::string>(), *args, std::move(id), raw);
}

void scan_blocks(std::string_view text, std::string_view begin, std::string_view end,
                 MessageBuilder& out, const BlockBody& body) {
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const auto start = text.find(begin, pos);
    if (start == std::string_view::npos) {
      out.content(text.substr(pos));
      return;
    }
    out.content(text.substr(pos, start - pos));
    const auto body_start = start + begin.size();
    const auto stop = text.find(end, body_start);
    if (stop == std::string_view::npos) {
      out.malformed(text.substr(start),
                    "unterminated " + std::string(begin) + " (no " + std::string(end) + ")");
      return;
    }
    body(text.substr(body_start, stop - body_start), text.substr(start, stop + end.size() - start),
         out);
    pos = stop + end.size();
  }
}

std::string_view split_reasoning(std::string_view text, std::string_view open,
                                 std::string_view close, MessageBuilder& out) {
  const auto lead = text.find_first_not_of(" \t\r\n");
  if (lead != std::string_view::npos && text.substr(lead).starts_with(open)) {
    const auto inner = text.substr(lead + open.size());
    const auto stop = inner.find(close);
    // Cut off mid-thought (length limit): all of it is reasoning; there is nothing malformed.
    if (stop == std::string_view::npos) {
      out.reasoning(inner);
      return {};
    }
    out.reasoning(inner.substr(0, stop));
    return inner.substr(stop + close.size());
  }
  // The prompt may end with the open tag already (QwQ, R1, Laguna, V4 thinking), so the output
  // carries only the close tag.
  const auto stop = text.find(close);
  if (stop != std::string_view::npos && text.substr(0, stop).find(open) == std::string_view::npos) {
    out.reasoning(text.substr(0, stop));
    return text.substr(stop + close.size());
  }
  return text;
}

Json typed_parameter(const ToolCallParseOptions& options, std::string_view function,
                     std::string_view parameter, std::string_view raw) {
  const auto* type = schema_type(options.tools, function, parameter);
  if (type != nullptr && declares_only_string(*type)) return Json(std::string(raw));
  if (!trim(raw).empty()) {
    if (auto value = parse_json(raw)) return std::move(*value);
  }
  return Json(std::string(raw));
}

std::optional<std::string> xml_attribute(std::string_view tag, std::string_view name) {
  std::size_t pos = 0;
  while ((pos = tag.find(name, pos)) != std::string_view::npos) {
    const bool boundary =
        pos == 0 || tag[pos - 1] == ' ' || tag[pos - 1] == '\t' || tag[pos - 1] == '\n';
    const auto after = pos + name.size();
    if (boundary && tag.substr(after).starts_with("=\"")) {
      const auto value_start = after + 2;
      const auto value_end = tag.find('"', value_start);
      if (value_end == std::string_view::npos) return std::nullopt;
      return std::string(tag.substr(value_start, value_end - value_start));
    }
    pos = after;
  }
  return std::nullopt;
}

}  // namespace sluice::text::tool_call_detail
