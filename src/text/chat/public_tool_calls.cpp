// The public ToolCallGrammar (include/sluice/tool_calls.h) over the tool-call parsers of this
// folder: translates the structs and parses the tool list once per call.
#include <nlohmann/json.hpp>

#include "sluice/tool_calls.h"
#include "text/chat/tool_call_parser.h"

namespace sluice {
namespace {

text::ToolCallFormat as_format(int format) {
  return static_cast<text::ToolCallFormat>(format);
}

}  // namespace

ToolCallGrammar::ToolCallGrammar(std::string_view chat_template)
    : format_(static_cast<int>(text::detect_tool_call_format(chat_template))) {}

bool ToolCallGrammar::known() const {
  return as_format(format_) != text::ToolCallFormat::None;
}

std::string_view ToolCallGrammar::name() const {
  return text::tool_call_format_name(as_format(format_));
}

AssistantOutput ToolCallGrammar::parse(std::string_view generated_text,
                                       const std::string& tools_json) const {
  nlohmann::json tools;
  text::ToolCallParseOptions options;
  if (!tools_json.empty()) {
    tools = nlohmann::json::parse(tools_json, nullptr, /*allow_exceptions=*/false);
    if (tools.is_array()) options.tools = &tools;
  }
  text::ParsedAssistantMessage parsed =
      text::parse_assistant_output(as_format(format_), generated_text, options);
  AssistantOutput out;
  out.content = std::move(parsed.content);
  out.reasoning_content = std::move(parsed.reasoning_content);
  out.errors = std::move(parsed.errors);
  for (text::ToolCall& call : parsed.tool_calls) {
    out.tool_calls.push_back(
        {std::move(call.id), std::move(call.name), std::move(call.arguments_json)});
  }
  return out;
}

struct ToolCallGrammar::StreamFilter::Impl {
  explicit Impl(text::ToolCallFormat format) : filter(format) {}
  text::ToolCallStreamFilter filter;
};

ToolCallGrammar::StreamFilter::StreamFilter(const ToolCallGrammar& grammar)
    : impl_(std::make_unique<Impl>(as_format(grammar.format_))) {}
ToolCallGrammar::StreamFilter::~StreamFilter() = default;

std::string ToolCallGrammar::StreamFilter::feed(std::string_view chunk) {
  return impl_->filter.feed(chunk);
}

std::string ToolCallGrammar::StreamFilter::finish() {
  return impl_->filter.finish();
}

bool ToolCallGrammar::StreamFilter::marker_seen() const {
  return impl_->filter.marker_seen();
}

}  // namespace sluice
