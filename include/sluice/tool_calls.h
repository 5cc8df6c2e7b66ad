// Tool calls through the public API: which tool-call grammar a chat template teaches its model,
// the parser that turns a finished assistant output into content, reasoning and structured
// calls, and the filter that streams content while holding back a possible call marker. The
// server's API adapters use this alone. Malformed model output is data, never an exception.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sluice {

struct ParsedToolCall {
  std::string id;  // empty unless the model's format carries one
  std::string name;
  std::string arguments_json;  // a JSON object, compact
};

struct AssistantOutput {
  std::string content;            // text outside calls and reasoning, trimmed
  std::string reasoning_content;  // think blocks / analysis channel
  std::vector<ParsedToolCall> tool_calls;
  std::vector<std::string> errors;  // one line per malformed part (kept in content too)
};

class ToolCallGrammar {
 public:
  // Detected from the markers the template writes for past assistant tool calls.
  explicit ToolCallGrammar(std::string_view chat_template);

  bool known() const;             // false: the template teaches no grammar we parse
  std::string_view name() const;  // "hermes", "llama3-json", …, "none"
  // `tools_json`: the OpenAI-style tool list ("" when none); its schemas type bare values.
  AssistantOutput parse(std::string_view generated_text, const std::string& tools_json) const;

  // Streams content: text that could begin a call marker is held back until it cannot;
  // once a marker begins nothing more is released (parse the whole output at the end).
  class StreamFilter {
   public:
    explicit StreamFilter(const ToolCallGrammar& grammar);
    ~StreamFilter();
    std::string feed(std::string_view chunk);
    std::string finish();  // the held-back tail when no marker began
    bool marker_seen() const;

   private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
  };

 private:
  int format_;  // text::ToolCallFormat, kept opaque here
};

}  // namespace sluice
