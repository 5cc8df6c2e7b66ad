// Entry points of tool-call parsing: format names, detection from a template's markers, the
// dispatch to one family parser, and the streaming filter. The grammars themselves live in
// tool_call_{json,xml,channel}_families.cpp.
#include "text/chat/tool_call_parser.h"

#include <algorithm>
#include <array>

#include "text/chat/tool_call_support.h"

namespace sluice::text {

namespace detail = tool_call_detail;

namespace {

bool has(std::string_view text, std::string_view marker) {
  return text.find(marker) != std::string_view::npos;
}

// End-of-turn tokens a detokenizer may leave at the end of the text; they are no content.
constexpr std::array<std::string_view, 10> kTrailingStops = {
    "<|im_end|>", "<|eot_id|>", "<|eom_id|>",    "<｜end▁of▁sentence｜>",
    "</s>",       "<turn|>",    "<|endoftext|>", "</assistant>",
    "〈|EOS|〉",  "<|return|>"};

std::string_view strip_trailing_stops(std::string_view text) {
  bool stripped = true;
  while (stripped) {
    stripped = false;
    text = detail::trim(text).empty() ? std::string_view{}
                                      : text.substr(0, text.find_last_not_of(" \t\r\n") + 1);
    for (const auto stop : kTrailingStops) {
      if (text.ends_with(stop)) {
        text.remove_suffix(stop.size());
        stripped = true;
      }
    }
  }
  return text;
}

// Laguna's prompt leaves "<assistant>\n" open; an output that repeats it is not content.
std::string_view strip_leading(std::string_view text, std::string_view prefix) {
  const auto lead = text.find_first_not_of(" \t\r\n");
  if (lead != std::string_view::npos && text.substr(lead).starts_with(prefix))
    return text.substr(lead + prefix.size());
  return text;
}

std::vector<std::string> stream_markers(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::None:
      return {};
    case ToolCallFormat::Hermes:
    case ToolCallFormat::Qwen3Coder:
    case ToolCallFormat::Glm45:
    case ToolCallFormat::Laguna:
      return {"<tool_call>"};
    case ToolCallFormat::Llama3Json:
      return {"<|python_tag|>", "{\"name\"", "{ \"name\"", "{\"type\"", "{ \"type\""};
    case ToolCallFormat::Mistral:
      return {"[TOOL_CALLS]"};
    case ToolCallFormat::DeepSeekV3:
    case ToolCallFormat::DeepSeekV31:
      return {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>"};
    case ToolCallFormat::DeepSeekV32:
    case ToolCallFormat::DeepSeekV4:
      return {"<｜DSML｜"};
    // The channel grammars address calls in the header; content streaming proper needs a
    // channel-aware streamer, so this only stops at the first addressed call.
    case ToolCallFormat::GptOssHarmony:
      return {" to=functions.", "<|constrain|>"};
    case ToolCallFormat::Muse:
      return {"<atem:function_calls>"};
    case ToolCallFormat::Gemma4:
      return {"<|tool_call>"};
    case ToolCallFormat::KimiK2:
      return {"<|tool_calls_section_begin|>", "<|tool_call_begin|>"};
    case ToolCallFormat::MiniMaxM2:
      return {"<minimax:tool_call>"};
  }
  return {};
}

}  // namespace

std::string_view tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::None:
      return "none";
    case ToolCallFormat::Hermes:
      return "hermes";
    case ToolCallFormat::Qwen3Coder:
      return "qwen3-coder";
    case ToolCallFormat::Llama3Json:
      return "llama3-json";
    case ToolCallFormat::Mistral:
      return "mistral";
    case ToolCallFormat::DeepSeekV3:
      return "deepseek-v3";
    case ToolCallFormat::DeepSeekV31:
      return "deepseek-v3.1";
    case ToolCallFormat::DeepSeekV32:
      return "deepseek-v3.2";
    case ToolCallFormat::DeepSeekV4:
      return "deepseek-v4";
    case ToolCallFormat::GptOssHarmony:
      return "gpt-oss-harmony";
    case ToolCallFormat::Glm45:
      return "glm-4.5";
    case ToolCallFormat::Gemma4:
      return "gemma4";
    case ToolCallFormat::KimiK2:
      return "kimi-k2";
    case ToolCallFormat::Laguna:
      return "laguna";
    case ToolCallFormat::Muse:
      return "muse";
    case ToolCallFormat::MiniMaxM2:
      return "minimax-m2";
  }
  return "unknown";
}

ToolCallFormat detect_tool_call_format(std::string_view t) {
  // Most specific markers first: several grammars share "<tool_call>".
  if (has(t, "<|channel|>") && (has(t, "<|constrain|>") || has(t, "<|call|>")))
    return ToolCallFormat::GptOssHarmony;
  if (has(t, "atem:function_calls") || has(t, "atem:invoke")) return ToolCallFormat::Muse;
  if (has(t, "<minimax:tool_call>") || has(t, "minimax:tool_call"))
    return ToolCallFormat::MiniMaxM2;
  if (has(t, "DSML")) {
    if (has(t, "'tool_calls>") || has(t, "tool_calls>\\n") || has(t, "tool_calls>\""))
      return ToolCallFormat::DeepSeekV4;
    return ToolCallFormat::DeepSeekV32;
  }
  if (has(t, "<｜tool▁calls▁begin｜>") || has(t, "<｜tool▁call▁begin｜>")) {
    return has(t, "```json") ? ToolCallFormat::DeepSeekV3 : ToolCallFormat::DeepSeekV31;
  }
  if (has(t, "<|tool_calls_section_begin|>")) return ToolCallFormat::KimiK2;
  if (has(t, "<|tool_call>") && has(t, "<tool_call|>")) return ToolCallFormat::Gemma4;
  if (has(t, "<arg_key>")) {
    return has(t, "<assistant>") || has(t, "Poolside") ? ToolCallFormat::Laguna
                                                       : ToolCallFormat::Glm45;
  }
  if (has(t, "<function=") && has(t, "<parameter=")) return ToolCallFormat::Qwen3Coder;
  if (has(t, "<tool_call>")) return ToolCallFormat::Hermes;
  if (has(t, "[TOOL_CALLS]")) return ToolCallFormat::Mistral;
  if (has(t, "<|python_tag|>") || has(t, "{\"name\": function name"))
    return ToolCallFormat::Llama3Json;
  return ToolCallFormat::None;
}

ParsedAssistantMessage parse_assistant_output(ToolCallFormat format,
                                              std::string_view generated_text,
                                              const ToolCallParseOptions& options) {
  detail::MessageBuilder out(tool_call_format_name(format), options);
  const bool channels = format == ToolCallFormat::GptOssHarmony || format == ToolCallFormat::Muse;
  // The channel grammars need their terminators to split messages; the rest drop them.
  const auto text = channels ? generated_text : strip_trailing_stops(generated_text);
  switch (format) {
    case ToolCallFormat::None:
      out.content(text);
      break;
    case ToolCallFormat::Hermes:
    case ToolCallFormat::Qwen3Coder:
      detail::parse_hermes(text, out);
      break;
    case ToolCallFormat::Llama3Json:
      detail::parse_llama3(text, out);
      break;
    case ToolCallFormat::Mistral:
      detail::parse_mistral(text, out);
      break;
    case ToolCallFormat::DeepSeekV3:
    case ToolCallFormat::DeepSeekV31:
      detail::parse_deepseek_v3(text, out);
      break;
    case ToolCallFormat::DeepSeekV32:
    case ToolCallFormat::DeepSeekV4:
      detail::parse_deepseek_dsml(text, out);
      break;
    case ToolCallFormat::GptOssHarmony:
      detail::parse_gpt_oss(text, out);
      break;
    case ToolCallFormat::Glm45:
      detail::parse_glm45(text, out);
      break;
    case ToolCallFormat::Laguna:
      detail::parse_glm45(strip_leading(text, "<assistant>"), out);
      break;
    case ToolCallFormat::Gemma4:
      detail::parse_gemma4(text, out);
      break;
    case ToolCallFormat::KimiK2:
      detail::parse_kimi_k2(text, out);
      break;
    case ToolCallFormat::Muse:
      detail::parse_muse(text, out);
      break;
    case ToolCallFormat::MiniMaxM2:
      detail::parse_minimax_m2(text, out);
      break;
  }
  return out.finish();
}

ToolCallStreamFilter::ToolCallStreamFilter(ToolCallFormat format)
    : markers_(stream_markers(format)) {}

std::string ToolCallStreamFilter::feed(std::string_view chunk) {
  if (marker_seen_) return {};
  pending_ += chunk;
  std::size_t first = std::string::npos;
  for (const auto& m : markers_) first = std::min(first, pending_.find(m));
  if (first != std::string::npos) {
    marker_seen_ = true;
    std::string safe = pending_.substr(0, first);
    pending_.clear();
    return safe;
  }
  // Hold back the longest tail that could still grow into a marker. Markers start with an
  // ASCII byte, so the cut never splits a UTF-8 sequence.
  std::size_t hold = 0;
  for (const auto& m : markers_) {
    for (std::size_t n = std::min(m.size() - 1, pending_.size()); n > hold; --n) {
      if (std::string_view(pending_).substr(pending_.size() - n) ==
          std::string_view(m).substr(0, n)) {
        hold = n;
        break;
      }
    }
  }
  std::string safe = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return safe;
}

std::string ToolCallStreamFilter::finish() {
  if (marker_seen_) return {};
  std::string rest = std::move(pending_);
  pending_.clear();
  return rest;
}

}  // namespace sluice::text
