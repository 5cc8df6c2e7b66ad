// Tool-call parsing on realistic outputs of each family, written in the exact form the
// family's chat template renders past calls (../shared/testdata/chat-templates). Malformed
// outputs, robustness and the streaming filter are in tool_call_malformed_test.cpp; detection
// over the template corpus in tool_call_detect_test.cpp.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "text/chat/tool_call_parser.h"

namespace sluice::text {
namespace {

using F = ToolCallFormat;

ParsedAssistantMessage parse(F format, std::string_view text,
                             const ToolCallParseOptions& options = {}) {
  return parse_assistant_output(format, text, options);
}

void expect_call(const ParsedAssistantMessage& m, std::size_t i, std::string_view name,
                 std::string_view args, std::string_view id = "") {
  ASSERT_LT(i, m.tool_calls.size());
  EXPECT_EQ(m.tool_calls[i].name, name);
  EXPECT_EQ(m.tool_calls[i].arguments_json, args);
  EXPECT_EQ(m.tool_calls[i].id, id);
}

void expect_clean(const ParsedAssistantMessage& m) {
  EXPECT_TRUE(m.errors.empty()) << (m.errors.empty() ? "" : m.errors.front());
}

TEST(ToolCallParser, NoneKeepsEverythingAsContent) {
  const auto m = parse(F::None, "<tool_call>{\"name\": \"x\"}</tool_call>");
  EXPECT_EQ(m.content, "<tool_call>{\"name\": \"x\"}</tool_call>");
  EXPECT_TRUE(m.tool_calls.empty());
  expect_clean(m);
}

TEST(ToolCallParser, HermesQwen3ReasoningTextAndTwoCalls) {
  const auto m = parse(
      F::Hermes,
      "<think>\nThe user wants the weather and the time.\n</think>\n\nLet me check.\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\", \"unit\": "
      "\"celsius\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": "
      "\"Europe/Paris\"}}\n</tool_call><|im_end|>");
  expect_clean(m);
  EXPECT_EQ(m.reasoning_content, "The user wants the weather and the time.");
  EXPECT_EQ(m.content, "Let me check.");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  expect_call(m, 0, "get_weather", R"({"location":"Paris","unit":"celsius"})");
  expect_call(m, 1, "get_time", R"({"tz":"Europe/Paris"})");
}

TEST(ToolCallParser, HermesNestedUnicodeEscapesAndKeyOrderKept) {
  const auto m = parse(
      F::Hermes,
      "<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"/tmp/a \\\"b\\\".txt\", "
      "\"content\": \"日本語 🎉\\n\\ttab\", \"meta\": {\"z\": [1, 2.5, null, true], \"a\": {}}}}\n"
      "</tool_call>");
  expect_clean(m);
  expect_call(
      m, 0, "write_file",
      R"({"path":"/tmp/a \"b\".txt","content":"日本語 🎉\n\ttab","meta":{"z":[1,2.5,null,true],"a":{}}})");
  EXPECT_EQ(m.content, "");
}

TEST(ToolCallParser, HermesQwqPromptOpenedThinkAndDoubleEncodedArguments) {
  // QwQ's prompt ends with "<think>\n", so the output has only the closing tag.
  const auto m = parse(F::Hermes,
                       "Considering it.\n</think>\n<tool_call>\n{\"name\": \"f\", \"arguments\": "
                       "\"{\\\"x\\\": 1}\"}\n"
                       "</tool_call>");
  expect_clean(m);
  EXPECT_EQ(m.reasoning_content, "Considering it.");
  expect_call(m, 0, "f", R"({"x":1})");
}

TEST(ToolCallParser, HermesPlainAnswerWithoutCalls) {
  const auto m =
      parse(F::Hermes, "<think>\n\n</think>\n\nThe capital of France is Paris.<|im_end|>");
  expect_clean(m);
  EXPECT_EQ(m.content, "The capital of France is Paris.");
  EXPECT_EQ(m.reasoning_content, "");
  EXPECT_TRUE(m.tool_calls.empty());
}

TEST(ToolCallParser, Qwen3CoderXmlParametersTypedBySchemaOrJson) {
  const std::string out =
      "I'll search for it.\n<tool_call>\n<function=search>\n<parameter=query>\nhello "
      "\"world\"\n</parameter>\n"
      "<parameter=limit>\n5\n</parameter>\n<parameter=filters>\n{\"lang\": [\"en\", "
      "\"fr\"]}\n</parameter>\n"
      "</function>\n</tool_call>";
  const auto m = parse(F::Qwen3Coder, out);
  expect_clean(m);
  EXPECT_EQ(m.content, "I'll search for it.");
  expect_call(m, 0, "search",
              R"({"query":"hello \"world\"","limit":5,"filters":{"lang":["en","fr"]}})");

  const auto tools =
      nlohmann::json::parse(R"([{"type": "function", "function": {"name": "search", "parameters":
      {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "string"}}}}}])");
  const auto typed = parse(F::Qwen3Coder, out, {.tools = &tools});
  expect_call(typed, 0, "search",
              R"({"query":"hello \"world\"","limit":"5","filters":{"lang":["en","fr"]}})");
}

TEST(ToolCallParser, Qwen3CoderMultilineValueAndMissingParameterClose) {
  const auto m = parse(
      F::Qwen3Coder,
      "<tool_call>\n<function=write>\n<parameter=text>\nline 1\nline 2\n<parameter=mode>\nappend\n"
      "</function>\n</tool_call>");
  expect_clean(m);
  expect_call(m, 0, "write", R"({"text":"line 1\nline 2","mode":"append"})");
}

TEST(ToolCallParser, Llama3BareJsonCall) {
  const auto m = parse(F::Llama3Json,
                       "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Tokyo\", "
                       "\"days\": 3}}<|eot_id|>");
  expect_clean(m);
  EXPECT_EQ(m.content, "");
  expect_call(m, 0, "get_weather", R"({"location":"Tokyo","days":3})");
}

TEST(ToolCallParser, Llama3SeveralCallsSeparatedBySemicolon) {
  const auto m =
      parse(F::Llama3Json,
            "{\"type\": \"function\", \"name\": \"a\", \"parameters\": {\"x\": \"}{\"}}; "
            "{\"name\": \"b\", \"parameters\": {}}");
  expect_clean(m);
  ASSERT_EQ(m.tool_calls.size(), 2u);
  expect_call(m, 0, "a", R"({"x":"}{"})");
  expect_call(m, 1, "b", "{}");
  EXPECT_EQ(m.content, "");
}

TEST(ToolCallParser, Llama3PythonTagBuiltinAndCode) {
  auto m =
      parse(F::Llama3Json,
            "<|python_tag|>brave_search.call(query=\"current weather in Menlo Park\")<|eom_id|>");
  expect_clean(m);
  expect_call(m, 0, "brave_search", R"({"query":"current weather in Menlo Park"})");

  m = parse(F::Llama3Json, "<|python_tag|>{\"name\": \"lookup\", \"parameters\": {\"id\": 7}}");
  expect_clean(m);
  expect_call(m, 0, "lookup", R"({"id":7})");

  m = parse(F::Llama3Json, "<|python_tag|>print(2 + 2)");
  expect_clean(m);
  expect_call(m, 0, "python", R"j({"code":"print(2 + 2)"})j");
}

TEST(ToolCallParser, Llama3ProseWithBracesIsContent) {
  const auto m = parse(F::Llama3Json, "Use a dict like {\"a\": 1} in Python.");
  expect_clean(m);
  EXPECT_TRUE(m.tool_calls.empty());
  EXPECT_EQ(m.content, "Use a dict like {\"a\": 1} in Python.");
}

TEST(ToolCallParser, MistralNemoJsonArrayWithIds) {
  const auto m = parse(
      F::Mistral,
      "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": "
      "\"abc123def\"}, {\"name\": \"get_time\", \"arguments\": {}, \"id\": \"ghi456jkl\"}]</s>");
  expect_clean(m);
  ASSERT_EQ(m.tool_calls.size(), 2u);
  expect_call(m, 0, "get_weather", R"({"city":"Paris"})", "abc123def");
  expect_call(m, 1, "get_time", "{}", "ghi456jkl");
}

TEST(ToolCallParser, MistralSmall32NameArgsAndCallId) {
  const auto m = parse(
      F::Mistral,
      "[THINK]Two lookups needed.[/THINK]Sure.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}"
      "[TOOL_CALLS]get_time[CALL_ID]x1y2z3w4v[ARGS]{\"tz\": \"CET\"}</s>");
  expect_clean(m);
  EXPECT_EQ(m.reasoning_content, "Two lookups needed.");
  EXPECT_EQ(m.content, "Sure.");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  expect_call(m, 0, "get_weather", R"({"city":"Paris"})");
  expect_call(m, 1, "get_time", R"({"tz":"CET"})", "x1y2z3w4v");
}

TEST(ToolCallParser, DeepSeekR1FencedJsonCalls) {
  const auto m = parse(F::DeepSeekV3,
                       "<think>\nI need the weather in Berlin and "
                       "Rome.\n</think>\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin"
                       "｜>function<｜tool▁sep｜>get_weather\n```json\n{\"location\": "
                       "\"Berlin\"}\n```<｜tool▁call▁end｜>\n"
                       "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"
                       "\"location\": \"Rome\"}\n```"
                       "<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>");
  expect_clean(m);
  EXPECT_EQ(m.reasoning_content, "I need the weather in Berlin and Rome.");
  EXPECT_EQ(m.content, "");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  expect_call(m, 0, "get_weather", R"({"location":"Berlin"})");
  expect_call(m, 1, "get_weather", R"({"location":"Rome"})");
}

TEST(ToolCallParser, DeepSeekV31NameSepJson) {
  const auto m = parse(
      F::DeepSeekV31,
      "Checking "
      "both.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"location\": "
      "\"Berlin\", \"opts\": {\"units\": "
      "[\"metric\"]}}<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_time<｜tool▁sep"
      "｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>");
  expect_clean(m);
  EXPECT_EQ(m.content, "Checking both.");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  expect_call(m, 0, "get_weather", R"({"location":"Berlin","opts":{"units":["metric"]}})");
  expect_call(m, 1, "get_time", "{}");
}

TEST(ToolCallParser, DeepSeekV32DsmlFunctionCalls) {
  const auto m = parse(
      F::DeepSeekV32,
      "I'll search.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke "
      "name=\"search\">\n<｜DSML｜parameter "
      "name=\"query\" string=\"true\">42</｜DSML｜parameter>\n<｜DSML｜parameter name=\"top_k\" "
      "string=\"false\">3</｜DSML｜parameter>\n<｜DSML｜parameter name=\"filter\" "
      "string=\"false\">{\"site\": "
      "[\"a.org\"]}</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke "
      "name=\"now\">\n</｜DSML｜invoke>\n"
      "</｜DSML｜function_calls><｜end▁of▁sentence｜>");
  expect_clean(m);
  EXPECT_EQ(m.content, "I'll search.");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  expect_call(m, 0, "search", R"({"query":"42","top_k":3,"filter":{"site":["a.org"]}})");
  expect_call(m, 1, "now", "{}");
}

TEST(ToolCallParser, DeepSeekV4DsmlToolCallsAfterThinking) {
  // V4's prompt ends with "<think>" in thinking mode.
  const auto m =
      parse(F::DeepSeekV4,
            "The user asks for a file.</think>Reading it.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke "
            "name=\"read_file\">\n<｜DSML｜parameter name=\"path\" string=\"true\">C:\\dir\\ü.txt"
            "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>");
  expect_clean(m);
  EXPECT_EQ(m.reasoning_content, "The user asks for a file.");
  EXPECT_EQ(m.content, "Reading it.");
  expect_call(m, 0, "read_file", R"({"path":"C:\\dir\\ü.txt"})");
}

TEST(ToolCallParser, GptOssAnalysisThenCall) {
  const auto m = parse(F::GptOssHarmony,
                       "<|channel|>analysis<|message|>User asks weather in SF. Use "
                       "get_weather.<|end|><|start|>assistant"
                       "<|channel|>commentary to=functions.get_weather "
                       "<|constrain|>json<|message|>{\"location\":\"San "
                       "Francisco\",\"unit\":\"F\"}<|call|>");
  expect_clean(m);
  EXPECT_EQ(m.reasoning_content, "User asks weather in SF. Use get_weather.");
  EXPECT_EQ(m.content, "");
  expect_call(m, 0, "get_weather", R"({"location":"San Francisco","unit":"F"})");
}

TEST(ToolCallParser, GptOssRecipientBeforeChannelAndNoCallToken) {
  // The <|call|> stop token is usually not part of the decoded text.
  const auto m = parse(
      F::GptOssHarmony,
      "<|start|>assistant to=functions.lookup<|channel|>commentary json<|message|>{\"q\": \"ü\"}");
  expect_clean(m);
  expect_call(m, 0, "lookup", R"({"q":"ü"})");
}

TEST(ToolCallParser, GptOssFinalAnswer) {
  const auto m = parse(
      F::GptOssHarmony,
      "<|channel|>analysis<|message|>Simple greeting.<|end|><|start|>assistant<|channel|>final"
      "<|message|>Hello! How can I help?<|return|>");
  expect_clean(m);
  EXPECT_EQ(m.reasoning_content, "Simple greeting.");
  EXPECT_EQ(m.content, "Hello! How can I help?");
  EXPECT_TRUE(m.tool_calls.empty());
}

TEST(ToolCallParser, Glm45NewlineSeparatedArguments) {
  const auto m = parse(
      F::Glm45,
      "<think>I should look it "
      "up.</think>\nChecking.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n"
      "<arg_value>北京</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</"
      "arg_value>\n<arg_key>opts"
      "</arg_key>\n<arg_value>{\"metric\": true}</arg_value>\n</tool_call>\n<tool_call>get_time\n"
      "</tool_call>");
  expect_clean(m);
  EXPECT_EQ(m.reasoning_content, "I should look it up.");
  EXPECT_EQ(m.content, "Checking.");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  expect_call(m, 0, "get_weather", R"({"city":"北京","days":3,"opts":{"metric":true}})");
  expect_call(m, 1, "get_time", "{}");
}

TEST(ToolCallParser, Glm47CompactArguments) {
  const auto m = parse(
      F::Glm45,
      "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>");
  expect_clean(m);
  expect_call(m, 0, "get_weather", R"({"city":"Paris"})");
}

TEST(ToolCallParser, Gemma4ThoughtAndCustomArgumentSyntax) {
  const auto m = parse(
      F::Gemma4,
      "<|channel>thought\nUser wants weather.<channel|><|tool_call>call:get_weather{location:<|\"|>"
      "Paris, "
      "France<|\"|>,days:3,opts:{metric:true,tags:[<|\"|>a<|\"|>,<|\"|>b}<|\"|>],ratio:-0.5}}"
      "<tool_call|>");
  expect_clean(m);
  EXPECT_EQ(m.reasoning_content, "User wants weather.");
  expect_call(
      m, 0, "get_weather",
      R"({"location":"Paris, France","days":3,"opts":{"metric":true,"tags":["a","b}"],"ratio":-0.5}})");
}

TEST(ToolCallParser, Gemma4TwoCallsAndTextAfter) {
  const auto m =
      parse(F::Gemma4,
            "<|tool_call>call:a{}<tool_call|><|tool_call>call:b{x:null}<tool_call|>Done.<turn|>");
  expect_clean(m);
  ASSERT_EQ(m.tool_calls.size(), 2u);
  expect_call(m, 0, "a", "{}");
  expect_call(m, 1, "b", R"({"x":null})");
  EXPECT_EQ(m.content, "Done.");
}

TEST(ToolCallParser, KimiK2SectionWithIds) {
  const auto m = parse(
      F::KimiK2,
      "<think>Need two tools.</think>Sure.<|tool_calls_section_begin|><|tool_call_begin|>"
      "functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|>"
      "<|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{}<|tool_call_end|>"
      "<|tool_calls_section_end|><|im_end|>");
  expect_clean(m);
  EXPECT_EQ(m.reasoning_content, "Need two tools.");
  EXPECT_EQ(m.content, "Sure.");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  expect_call(m, 0, "get_weather", R"({"city":"Paris"})", "functions.get_weather:0");
  expect_call(m, 1, "get_time", "{}", "functions.get_time:1");
}

TEST(ToolCallParser, LagunaGlmGrammarInsideAssistantTurn) {
  auto m = parse(F::Laguna,
                 "<think>\nplan the lookup\n</think>\nI'll "
                 "check.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n"
                 "<arg_value>Paris</arg_value>\n</tool_call>\n</assistant>");
  expect_clean(m);
  EXPECT_EQ(m.reasoning_content, "plan the lookup");
  EXPECT_EQ(m.content, "I'll check.");
  expect_call(m, 0, "get_weather", R"({"city":"Paris"})");

  // Thinking off: the prompt ends with "</think>", the output is the answer and the turn end.
  m = parse(F::Laguna, "\nHello there!\n</assistant>\n");
  expect_clean(m);
  EXPECT_EQ(m.content, "Hello there!");
}

TEST(ToolCallParser, MuseAtemChannels) {
  const auto m = parse(
      F::Muse,
      " to=self<|message|>Need the weather.<|eom|><|start|>assistant to=weather.get<|message|>"
      "<atem:function_calls>\n<atem:invoke name=\"weather.get\">\n<atem:parameter "
      "name=\"city\">Paris"
      "</atem:parameter>\n<atem:parameter name=\"days\">2</atem:parameter>\n<atem:parameter "
      "name=\"note\">two\n\"lines\"</atem:parameter>\n</atem:invoke>\n</"
      "atem:function_calls><|eom|>");
  expect_clean(m);
  EXPECT_EQ(m.reasoning_content, "Need the weather.");
  EXPECT_EQ(m.content, "");
  expect_call(m, 0, "weather.get", R"({"city":"Paris","days":2,"note":"two\n\"lines\""})");
}

TEST(ToolCallParser, MuseAnswerToUser) {
  const auto m = parse(
      F::Muse,
      " to=self<|message|>Easy.<|eom|><|start|>assistant to=user<|message|>It is sunny.<|eot|>");
  expect_clean(m);
  EXPECT_EQ(m.reasoning_content, "Easy.");
  EXPECT_EQ(m.content, "It is sunny.");
}

TEST(ToolCallParser, MiniMaxM2InvokeBlocks) {
  const auto m = parse(
      F::MiniMaxM2,
      "<think>look it up</think>\n\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter "
      "name=\"city\">Paris</parameter>\n<parameter name=\"days\">[1, 2]</parameter>\n</invoke>\n"
      "</minimax:tool_call>");
  expect_clean(m);
  EXPECT_EQ(m.reasoning_content, "look it up");
  expect_call(m, 0, "get_weather", R"({"city":"Paris","days":[1,2]})");
}

}  // namespace
}  // namespace sluice::text
