// Tool calls in generated text: which output format a chat template teaches its model
// (detected from the template's own markers), and the parser that turns one finished
// assistant output into content, reasoning and structured calls. Malformed model output is
// data, not a failure: it stays in the content and is described in `errors`; nothing throws.
// Knows nothing of tokens, sessions or HTTP.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace sluice::text {

// One entry per distinct output grammar; several model families share one.
enum class ToolCallFormat {
  None,        // no tool-call grammar: the whole output is content
  Hermes,      // Hermes 2/3, Qwen2.5, Qwen3, QwQ: <tool_call>{"name", "arguments"}</tool_call>
  Qwen3Coder,  // Qwen3-Coder, Qwen3.5: <tool_call><function=f><parameter=k>v</parameter>…
  Llama3Json,  // Llama 3.1/3.2/3.3: bare {"name", "parameters"} or <|python_tag|>…
  Mistral,     // [TOOL_CALLS][{…}] (Nemo) and [TOOL_CALLS]name[CALL_ID]id[ARGS]{…} (Small 3.2+)
  DeepSeekV3,  // V3 / R1: <｜tool▁call▁begin｜>function<｜tool▁sep｜>name\n```json\n{…}\n```
  DeepSeekV31,  // V3.1: <｜tool▁call▁begin｜>name<｜tool▁sep｜>{…}<｜tool▁call▁end｜>
  DeepSeekV32,  // V3.2: <｜DSML｜function_calls><｜DSML｜invoke name=…><｜DSML｜parameter …>
  DeepSeekV4,     // V4: the same DSML grammar inside <｜DSML｜tool_calls>
  GptOssHarmony,  // gpt-oss: <|channel|>analysis/commentary/final, to=functions.name
  Glm45,          // GLM-4.5/4.6/4.7: <tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value>
  Gemma4,     // Gemma 4: <|tool_call>call:name{k:v,…}<tool_call|>, <|channel>thought…<channel|>
  KimiK2,     // Kimi K2: <|tool_calls_section_begin|><|tool_call_begin|>functions.name:0…
  Laguna,     // Poolside Laguna: the GLM grammar inside <assistant>…</assistant>
  Muse,       // Muse Glimmer: ATEM channels (to=self / to=tool) and <atem:function_calls>
  MiniMaxM2,  // MiniMax-M2: <minimax:tool_call><invoke name=…><parameter name=…>
};

std::string_view tool_call_format_name(ToolCallFormat format);

// The format a model prompted with `chat_template` will answer in, judged from the markers
// the template writes for past assistant tool calls. None when it teaches no known grammar.
ToolCallFormat detect_tool_call_format(std::string_view chat_template);

struct ToolCall {
  std::string id;  // empty unless the format carries one (Kimi K2, Mistral)
  std::string name;
  std::string arguments_json;  // always a JSON object, compact, keys in emitted order
};

struct ParsedAssistantMessage {
  std::string content;            // text outside calls and reasoning, trimmed
  std::string reasoning_content;  // think blocks / analysis channel, trimmed
  std::vector<ToolCall> tool_calls;
  std::vector<std::string> errors;  // one line per malformed part (also left in content)
};

struct ToolCallParseOptions {
  // OpenAI-style tool list ([{"type":"function","function":{"name","parameters"}}]). The XML
  // grammars (GLM, Qwen3-Coder, Laguna, Muse, MiniMax) print string values bare, so only the
  // schema can tell the string "42" from the number 42; without it a value that parses as
  // JSON is taken as JSON.
  const nlohmann::json* tools = nullptr;
};

ParsedAssistantMessage parse_assistant_output(ToolCallFormat format,
                                              std::string_view generated_text,
                                              const ToolCallParseOptions& options = {});

// Streams content safely while a model generates: text that might be the start of the
// format's tool-call marker is held back until it is known not to be one; once a marker
// begins, nothing more is released and the caller parses the whole output at the end.
// Reasoning blocks and the channel grammars (harmony, Muse) need a channel-aware streamer.
class ToolCallStreamFilter {
 public:
  explicit ToolCallStreamFilter(ToolCallFormat format);
  std::string feed(std::string_view chunk);  // the text now safe to show as content
  std::string finish();                      // the held-back tail when no marker began
  bool marker_seen() const { return marker_seen_; }

 private:
  std::vector<std::string> markers_;
  std::string pending_;
  bool marker_seen_ = false;
};

}  // namespace sluice::text
