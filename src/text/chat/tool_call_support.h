// Pieces every tool-call family parser shares (private to the tool_call_*.cpp files): the
// message builder that keeps malformed parts in content, the marker-delimited block scanner,
// think-block splitting, JSON parsing that never throws, and schema-aware typing of the bare
// parameter values the XML grammars print.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "text/chat/tool_call_parser.h"

namespace sluice::text::tool_call_detail {

using Json = nlohmann::ordered_json;

std::string_view trim(std::string_view text);

// Accumulates one parsed message. A family reports every byte of the output through it:
// as content, reasoning, a call, or a malformed part (kept verbatim in content + an error).
class MessageBuilder {
 public:
  MessageBuilder(std::string_view family, const ToolCallParseOptions& options)
      : family_(family), options_(options) {}

  void content(std::string_view text) { content_ += text; }
  void reasoning(std::string_view text);
  void malformed(std::string_view raw, std::string_view why);
  // Adds a call whose arguments are already a JSON value; refuses (malformed) a non-object
  // or an empty name. `raw` is what goes back into content if refused.
  void call(std::string name, const Json& arguments, std::string id, std::string_view raw);
  // As call(), from arguments text (a JSON object, or a JSON string holding one).
  void call_from_text(std::string name, std::string_view arguments, std::string id,
                      std::string_view raw);

  const ToolCallParseOptions& options() const { return options_; }
  std::size_t call_count() const { return message_.tool_calls.size(); }
  ParsedAssistantMessage finish();

 private:
  std::string family_;
  const ToolCallParseOptions& options_;
  std::string content_;
  std::string reasoning_;
  ParsedAssistantMessage message_;
};

// Parses `text` (surrounding whitespace allowed) as exactly one JSON value.
std::optional<Json> parse_json(std::string_view text, std::string* error = nullptr);
// One past the end of the JSON object/array starting at text[pos] ('{' or '['), found by
// bracket matching that respects strings; npos when it never closes.
std::size_t json_container_end(std::string_view text, std::size_t pos);
std::string dump_json(const Json& value);

// Calls `body` for every `begin`…`end` block; text between blocks goes to content. A block
// with no `end` is reported unterminated and kept in content. `body` gets the builder and the
// raw block (markers included) so it can report or fall back to content itself.
using BlockBody = std::function<void(std::string_view body, std::string_view raw, MessageBuilder&)>;
void scan_blocks(std::string_view text, std::string_view begin, std::string_view end,
                 MessageBuilder& out, const BlockBody& body);

// Leading reasoning: "<think>r</think>rest", or "r</think>rest" when the prompt already opened
// the block, or "<think>r" cut off by the end of generation. Returns the rest.
std::string_view split_reasoning(std::string_view text, std::string_view open,
                                 std::string_view close, MessageBuilder& out);

// A bare parameter value from an XML grammar, typed by the tool's schema when one was given:
// declared string → the text as is; otherwise JSON when it parses, the text when it does not.
Json typed_parameter(const ToolCallParseOptions& options, std::string_view function,
                     std::string_view parameter, std::string_view raw);

// Value of attribute `name="…"` inside an XML-ish start tag; nullopt when absent.
std::optional<std::string> xml_attribute(std::string_view tag, std::string_view name);

// A call written as a JSON object: {"name", "arguments"|"parameters", "id"?}, or the OpenAI
// shape {"type":"function","function":{…}}. Anything else is reported malformed.
void call_from_object(const Json& object, std::string_view raw, MessageBuilder& out);
// Qwen3-Coder's body: <function=name><parameter=k>v</parameter>…</function>.
void parse_qwen3_coder_body(std::string_view body, std::string_view raw, MessageBuilder& out);

// Family parsers, one per grammar (tool_call_json_families.cpp, tool_call_xml_families.cpp,
// tool_call_channel_families.cpp). Each consumes the whole output.
void parse_hermes(std::string_view text, MessageBuilder& out);  // JSON or Qwen3-Coder bodies
void parse_llama3(std::string_view text, MessageBuilder& out);
void parse_mistral(std::string_view text, MessageBuilder& out);
void parse_deepseek_v3(std::string_view text, MessageBuilder& out);  // V3, R1 and V3.1
void parse_kimi_k2(std::string_view text, MessageBuilder& out);
void parse_glm45(std::string_view text, MessageBuilder& out);          // GLM and Laguna
void parse_deepseek_dsml(std::string_view text, MessageBuilder& out);  // V3.2 and V4
void parse_minimax_m2(std::string_view text, MessageBuilder& out);
void parse_atem_blocks(std::string_view text, MessageBuilder& out);  // Muse's calls, one message
void parse_muse(std::string_view text, MessageBuilder& out);
void parse_gpt_oss(std::string_view text, MessageBuilder& out);
void parse_gemma4(std::string_view text, MessageBuilder& out);

// Gemma 4's argument syntax ({key:<|"|>text<|"|>,n:3,…}) → JSON; nullopt + error when malformed.
std::optional<Json> parse_gemma4_value(std::string_view text, std::string& error);

}  // namespace sluice::text::tool_call_detail
