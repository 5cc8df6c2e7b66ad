// Malformed model output for every tool-call family: each case is reported in `errors`, its
// text stays in the content, the well-formed calls around it survive, and nothing throws —
// also for every truncation and many byte mutations of a valid output. Plus the streaming filter.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "text/chat/tool_call_parser.h"

namespace sluice::text {
namespace {

using F = ToolCallFormat;

struct Malformed {
  const char* label;
  F format;
  std::string text;
  std::size_t good_calls;  // calls that must still be parsed
  std::string kept;        // a piece of the malformed part that must remain in content
};

std::vector<Malformed> malformed_cases() {
  return {
      {"hermes truncated mid-JSON", F::Hermes,
       "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"loc", 0,
       "{\"name\": \"get_weather\""},
      {"hermes missing end tag", F::Hermes, "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n",
       0, "<tool_call>"},
      {"hermes invalid JSON", F::Hermes,
       "<tool_call>{\"name\": \"a\", \"arguments\": {x: 1}}</tool_call><tool_call>{\"name\": "
       "\"b\", \"arguments\": "
       "{}}</tool_call>",
       1, "{x: 1}"},
      {"hermes empty name", F::Hermes, "<tool_call>{\"name\": \"\", \"arguments\": {}}</tool_call>",
       0, "\"name\": \"\""},
      {"hermes no name", F::Hermes, "<tool_call>{\"arguments\": {}}</tool_call>", 0, "arguments"},
      {"hermes arguments not object", F::Hermes,
       "<tool_call>{\"name\": \"a\", \"arguments\": [1]}</tool_call>", 0, "[1]"},
      {"hermes garbage", F::Hermes, "<tool_call>!!!@@@</tool_call>", 0, "!!!@@@"},
      {"qwen3-coder no function", F::Qwen3Coder,
       "<tool_call>\n<parameter=a>\n1\n</parameter>\n</tool_call>", 0, "<parameter=a>"},
      {"qwen3-coder function tag unterminated", F::Qwen3Coder,
       "<tool_call>\n<function=search\n</tool_call>", 0, "<function=search"},
      {"llama3 truncated", F::Llama3Json,
       "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Tok", 0, "\"location\""},
      {"llama3 invalid JSON", F::Llama3Json, "{\"name\": \"f\", \"parameters\": {'a': 1}}", 0,
       "'a'"},
      {"llama3 empty python tag", F::Llama3Json, "<|python_tag|>", 0, "<|python_tag|>"},
      {"mistral no args", F::Mistral, "[TOOL_CALLS]get_weather{\"city\": \"Paris\"}", 0,
       "get_weather"},
      {"mistral truncated array", F::Mistral, "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {", 0,
       "[{\"name\""},
      {"mistral truncated args", F::Mistral,
       "[TOOL_CALLS]a[ARGS]{\"x\": 1}[TOOL_CALLS]b[ARGS]{\"y\":", 1, "b[ARGS]"},
      {"deepseek-r1 missing sep", F::DeepSeekV3,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather "
       "{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       0, "get_weather"},
      {"deepseek-r1 unterminated section", F::DeepSeekV3,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\"", 0,
       "```json"},
      {"deepseek-v3.1 bad JSON", F::DeepSeekV31,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\": "
       "}<｜tool▁call▁end｜><｜tool▁call▁begin｜>g<｜tool▁sep"
       "｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       1, "{\"a\": }"},
      {"dsml string=false not JSON", F::DeepSeekV32,
       "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"n\" "
       "string=\"false\">three"
       "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
       0, "three"},
      {"dsml invoke without name", F::DeepSeekV4,
       "<｜DSML｜tool_calls>\n<｜DSML｜invoke>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>", 0,
       "<｜DSML｜invoke>"},
      {"dsml unterminated parameter", F::DeepSeekV4,
       "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"p\" "
       "string=\"true\">x\n</｜DSML｜invoke>"
       "\n</｜DSML｜tool_calls>",
       0, "name=\"p\""},
      {"gpt-oss invalid JSON", F::GptOssHarmony,
       "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": tru<|call|>", 0,
       "{\"a\": tru"},
      {"gpt-oss header without message", F::GptOssHarmony,
       "<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>commentary "
       "to=functions.f",
       0, "to=functions.f"},
      {"glm value without key", F::Glm45, "<tool_call>f\n<arg_value>1</arg_value>\n</tool_call>", 0,
       "<arg_value>1"},
      {"glm unterminated value", F::Glm45,
       "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1\n</tool_call>", 0, "<arg_key>a"},
      {"glm empty name", F::Glm45,
       "<tool_call>\n<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>", 0, "<arg_key>a"},
      {"gemma4 no call prefix", F::Gemma4, "<|tool_call>get_weather{}<tool_call|>", 0,
       "get_weather{}"},
      {"gemma4 unterminated string", F::Gemma4, "<|tool_call>call:f{a:<|\"|>open}<tool_call|>", 0,
       "open"},
      {"gemma4 unterminated call", F::Gemma4, "<|tool_call>call:f{a:1", 0, "call:f{a:1"},
      {"kimi missing argument marker", F::KimiK2,
       "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0{}<|tool_call_end|><|tool_"
       "calls_section_end|>",
       0, "functions.f:0"},
      {"kimi truncated", F::KimiK2,
       "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{"
       "\"a\": 1",
       0, "{\"a\": 1"},
      {"laguna unterminated", F::Laguna,
       "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n", 0, "<tool_call>f"},
      {"muse tool message without calls", F::Muse,
       " to=weather.get<|message|>{\"city\": \"Paris\"}<|eom|>", 0, "{\"city\": \"Paris\"}"},
      {"muse unterminated block", F::Muse,
       " to=f<|message|><atem:function_calls>\n<atem:invoke name=\"f\">", 0,
       "<atem:invoke name=\"f\">"},
      {"minimax text between parameters", F::MiniMaxM2,
       "<minimax:tool_call>\n<invoke name=\"f\">\nhello\n<parameter "
       "name=\"a\">1</parameter>\n</invoke>\n"
       "</minimax:tool_call>",
       0, "hello"},
  };
}

TEST(ToolCallMalformed, ReportedKeptInContentNeverThrown) {
  for (const auto& c : malformed_cases()) {
    SCOPED_TRACE(c.label);
    ParsedAssistantMessage m;
    ASSERT_NO_THROW(m = parse_assistant_output(c.format, c.text));
    EXPECT_FALSE(m.errors.empty());
    EXPECT_EQ(m.tool_calls.size(), c.good_calls);
    EXPECT_NE(m.content.find(c.kept), std::string::npos) << "content: " << m.content;
    for (const auto& e : m.errors) EXPECT_EQ(e.find(tool_call_format_name(c.format)), 0u) << e;
  }
}

TEST(ToolCallMalformed, DeepNestingIsRefusedNotOverflowed) {
  const std::string deep =
      "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": " + std::string(100000, '[') +
      std::string(100000, ']') + "}}</tool_call>";
  const auto m = parse_assistant_output(F::Hermes, deep);
  EXPECT_TRUE(m.tool_calls.empty());
  EXPECT_FALSE(m.errors.empty());
  const std::string gemma = "<|tool_call>call:f{a:" + std::string(100000, '[') + "}<tool_call|>";
  EXPECT_FALSE(parse_assistant_output(F::Gemma4, gemma).errors.empty());
}

TEST(ToolCallMalformed, InvalidUtf8InArgumentsDoesNotThrow) {
  const std::string text = "<|tool_call>call:f{a:<|\"|>\xff\xfe bad<|\"|>}<tool_call|>";
  ParsedAssistantMessage m;
  ASSERT_NO_THROW(m = parse_assistant_output(F::Gemma4, text));
  ASSERT_EQ(m.tool_calls.size(), 1u);  // the bytes are replaced with U+FFFD in the JSON text
}

// One valid output per format; every prefix and random mutations of it must parse safely.
std::vector<std::pair<F, std::string>> valid_samples() {
  return {
      {F::Hermes,
       "<think>r</think>Hi<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": [1, {\"y\": "
       "\"z\"}]}}\n</tool_call>"},
      {F::Qwen3Coder,
       "<tool_call>\n<function=a>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>"},
      {F::Llama3Json,
       "{\"name\": \"a\", \"parameters\": {\"x\": \"}\"}}; <|python_tag|>b.call(q=\"1\")"},
      {F::Mistral,
       "[THINK]t[/THINK][TOOL_CALLS]a[CALL_ID]i[ARGS]{\"x\": 1}[TOOL_CALLS][{\"name\": \"b\"}]"},
      {F::DeepSeekV3,
       "<think>r</"
       "think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>a\n```json\n{}\n```<"
       "｜tool▁call▁end｜>"
       "<｜tool▁calls▁end｜>"},
      {F::DeepSeekV4,
       "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"a\">\n<｜DSML｜parameter name=\"p\" "
       "string=\"false\">[1]"
       "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"},
      {F::GptOssHarmony,
       "<|channel|>analysis<|message|>r<|end|><|start|>assistant<|channel|>commentary "
       "to=functions.a "
       "<|constrain|>json<|message|>{\"x\": 1}<|call|>"},
      {F::Glm45,
       "<tool_call>a\n<arg_key>k</arg_key>\n<arg_value>{\"v\": 1}</arg_value>\n</tool_call>"},
      {F::Gemma4,
       "<|channel>thought\nr<channel|><|tool_call>call:a{k:[<|\"|>v<|\"|>,{n:1}]}<tool_call|>"},
      {F::KimiK2,
       "<|tool_calls_section_begin|><|tool_call_begin|>functions.a:0<|tool_call_argument_begin|>{"
       "\"x\": 1}"
       "<|tool_call_end|><|tool_calls_section_end|>"},
      {F::Laguna,
       "<tool_call>a<arg_key>k</arg_key><arg_value>v</arg_value></tool_call></assistant>"},
      {F::Muse,
       " to=self<|message|>r<|eom|><|start|>assistant "
       "to=a<|message|><atem:function_calls>\n<atem:invoke name=\"a\">\n"
       "<atem:parameter "
       "name=\"k\">v</atem:parameter>\n</atem:invoke>\n</atem:function_calls><|eom|>"},
      {F::MiniMaxM2,
       "<minimax:tool_call>\n<invoke name=\"a\">\n<parameter "
       "name=\"k\">1</parameter>\n</invoke>\n</minimax:tool_call>"},
  };
}

TEST(ToolCallMalformed, EveryTruncationAndMutationIsSafe) {
  std::mt19937 rng(1234);
  for (const auto& [format, text] : valid_samples()) {
    SCOPED_TRACE(std::string(tool_call_format_name(format)));
    const auto full = parse_assistant_output(format, text);
    EXPECT_TRUE(full.errors.empty()) << full.errors.front();
    EXPECT_EQ(full.tool_calls.size(), format == F::Llama3Json || format == F::Mistral ? 2u : 1u);
    for (std::size_t n = 0; n <= text.size(); ++n) {
      ASSERT_NO_THROW(parse_assistant_output(format, std::string_view(text).substr(0, n))) << n;
    }
    for (int i = 0; i < 300; ++i) {
      std::string mutated = text;
      const auto at = rng() % mutated.size();
      mutated[at] = static_cast<char>(rng() % 256);
      ASSERT_NO_THROW(parse_assistant_output(format, mutated)) << mutated;
    }
  }
}

TEST(ToolCallStreamFilter, ReleasesTextAndHoldsBackPossibleMarker) {
  ToolCallStreamFilter filter(F::Hermes);
  std::string shown;
  for (const std::string_view chunk :
       {"Let me ", "check <", "tool", "_call>\n{\"name\"", ": \"a\"}</tool_call>"}) {
    shown += filter.feed(chunk);
  }
  shown += filter.finish();
  EXPECT_EQ(shown, "Let me check ");
  EXPECT_TRUE(filter.marker_seen());
}

TEST(ToolCallStreamFilter, FalseAlarmIsReleased) {
  ToolCallStreamFilter filter(F::Hermes);
  std::string shown = filter.feed("a <tool");
  EXPECT_EQ(shown, "a ");
  shown += filter.feed("s> are fine");
  shown += filter.finish();
  EXPECT_EQ(shown, "a <tools> are fine");
  EXPECT_FALSE(filter.marker_seen());
}

TEST(ToolCallStreamFilter, MultiByteMarkerAcrossChunks) {
  ToolCallStreamFilter filter(F::DeepSeekV31);
  const std::string text = "日本<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}";
  std::string shown;
  for (char c : text) shown += filter.feed(std::string_view(&c, 1));
  EXPECT_EQ(shown, "日本");
  EXPECT_TRUE(filter.marker_seen());
}

TEST(ToolCallStreamFilter, NoneFormatPassesThrough) {
  ToolCallStreamFilter filter(F::None);
  EXPECT_EQ(filter.feed("<tool_call>"), "<tool_call>");
  EXPECT_EQ(filter.finish(), "");
}

}  // namespace
}  // namespace sluice::text
