// Format detection over every template in ../shared/testdata/chat-templates: the families we
// know must map to their grammar, and the full template → format map is printed for review.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "text/chat/tool_call_parser.h"

namespace sluice::text {
namespace {

using F = ToolCallFormat;

const std::map<std::string, F>& expected_formats() {
  static const std::map<std::string, F> expected = {
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", F::Hermes},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", F::Hermes},
      {"Qwen-Qwen2.5-7B-Instruct", F::Hermes},
      {"Qwen-Qwen3-0.6B", F::Hermes},
      {"Qwen-QwQ-32B", F::Hermes},
      {"Qwen3-Coder", F::Qwen3Coder},
      {"Qwen3.5-4B", F::Qwen3Coder},
      {"meta-llama-Llama-3.1-8B-Instruct", F::Llama3Json},
      {"meta-llama-Llama-3.2-3B-Instruct", F::Llama3Json},
      {"meta-llama-Llama-3.3-70B-Instruct", F::Llama3Json},
      {"mistralai-Mistral-Nemo-Instruct-2407", F::Mistral},
      {"Mistral-Small-3.2-24B-Instruct-2506", F::Mistral},
      {"mistralai-Ministral-3-14B-Reasoning-2512", F::Mistral},
      {"unsloth-mistral-Devstral-Small-2507", F::Mistral},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", F::DeepSeekV3},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", F::DeepSeekV3},
      {"llama-cpp-deepseek-r1", F::DeepSeekV3},
      {"deepseek-ai-DeepSeek-V3.1", F::DeepSeekV31},
      {"deepseek-ai-DeepSeek-V3.2", F::DeepSeekV32},
      {"DeepSeek-V3.2", F::DeepSeekV32},
      {"deepseek-ai-DeepSeek-V4", F::DeepSeekV4},
      {"deepseek-ai-DeepSeek-V4-Flash-0731", F::DeepSeekV4},
      {"openai-gpt-oss-120b", F::GptOssHarmony},
      {"glm_4_5", F::Glm45},
      {"GLM-4.6", F::Glm45},
      {"GLM-4.7-Flash", F::Glm45},
      {"gemma4", F::Gemma4},
      {"google-gemma-4-31B-it", F::Gemma4},
      {"google-gemma-4-31B-it-interleaved", F::Gemma4},
      {"moonshotai-Kimi-K2", F::KimiK2},
      {"Kimi-K2-Instruct", F::KimiK2},
      {"Kimi-K2-Thinking", F::KimiK2},
      {"moonshotai-Kimi-K2-Thinking", F::KimiK2},
      {"poolside-Laguna-S-2.1", F::Laguna},
      {"poolside-Laguna-XS-2.1", F::Laguna},
      {"poolside-Laguna-XS.2", F::Laguna},
      {"muse-glimmer", F::Muse},
      {"MiniMax-M2", F::MiniMaxM2},
      {"unsloth-MiniMax-M2", F::MiniMaxM2},
      {"google-gemma-2-2b-it", F::None},
      {"microsoft-Phi-3.5-mini-instruct", F::None},
  };
  return expected;
}

TEST(ToolCallDetect, EveryTemplateInTheCorpus) {
  const std::filesystem::path dir = std::filesystem::path(SLUICE_TESTDATA_DIR) / "chat-templates";
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << "no template corpus at " << dir;
  std::map<std::string, F> detected;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".jinja") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    detected[entry.path().stem().string()] = detect_tool_call_format(text.str());
  }
  for (const auto& [name, format] : detected) {
    std::cout << "  " << name << " -> " << tool_call_format_name(format) << "\n";
  }
  std::size_t checked = 0;
  for (const auto& [name, want] : expected_formats()) {
    const auto it = detected.find(name);
    if (it == detected.end()) {
      ADD_FAILURE() << "expected template missing from the corpus: " << name;
      continue;
    }
    EXPECT_EQ(tool_call_format_name(it->second), tool_call_format_name(want)) << name;
    ++checked;
  }
  std::cout << "  checked " << checked << " of " << detected.size()
            << " templates against known families\n";
}

TEST(ToolCallDetect, MarkersWithoutACorpus) {
  EXPECT_EQ(detect_tool_call_format("Hello {{ messages }}"), F::None);
  EXPECT_EQ(detect_tool_call_format("{{ '<tool_call>\\n' + tool_call | tojson }}"), F::Hermes);
  EXPECT_EQ(detect_tool_call_format("<tool_call>{{ name }}<arg_key>"), F::Glm45);
  EXPECT_EQ(detect_tool_call_format("<tool_call>\n<function={{ n }}>\n<parameter={{ k }}>"),
            F::Qwen3Coder);
  EXPECT_EQ(detect_tool_call_format("<|tool_calls_section_begin|>"), F::KimiK2);
  EXPECT_EQ(detect_tool_call_format("[TOOL_CALLS]"), F::Mistral);
  EXPECT_EQ(
      detect_tool_call_format("{{- '<|tool_call>call:' + name + '{' -}}{{ '}<tool_call|>' }}"),
      F::Gemma4);
}

}  // namespace
}  // namespace sluice::text
