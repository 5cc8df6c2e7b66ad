// Batched decode (Generation::step_all, what the server's scheduler runs) against generating
// each request alone, on llama.cpp's tiny models: the same tokens and the same log-probabilities
// bit for bit, for dense, sliding-window (gemma3), sinks + sliding (gpt-oss), MoE (qwen3moe),
// shared KV layers + per-layer inputs and dense-beside-MoE layers (gemma4), MLA (deepseek2), MLA
// with DeepSeek sparse attention (glm-dsa: past 6 cached keys each query attends to its top 6) and
// per-layer head counts + gated sliding attention (laguna) and recurrent hybrid (qwen35,
// qwen3next: a gated delta net state per sequence; kimi-linear: KDA states + MLA) models, with
// prompts of different lengths, so every sequence sits at its own position and some are still
// prefilling while others decode. MoE models are batched with their experts streamed from disk at
// the cache floor too, against resident generation alone.
#include <gtest/gtest.h>

#include <filesystem>

#include "sluice/engine.h"

namespace sluice {
namespace {

std::string tiny_model(const std::string& name) {
  return std::string(SLUICE_TESTDATA_DIR) + "/llamacpp-tiny/" + name + ".gguf";
}

const std::vector<std::vector<int32_t>> kPrompts = {
    {1, 5, 9, 17, 33, 64, 2, 100, 7, 3, 50, 27},
    {1, 8, 2},
    {1, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60},
    {1, 77},
};

GenerationRequest request_for(const std::vector<int32_t>& prompt, int64_t max_tokens) {
  GenerationRequest request;
  request.prompt = prompt;
  request.max_tokens = max_tokens;
  request.logprobs = true;
  request.sampling.temperature = 0.9f;  // sampled, so the RNG path is covered too
  request.sampling.seed = uint64_t(prompt.size());
  return request;
}

std::vector<float> logprobs_of(const std::vector<TokenEvent>& events) {
  std::vector<float> out;
  for (const TokenEvent& e : events) {
    if (e.id >= 0) out.push_back(e.logprob);
  }
  return out;
}

// Runs the prompts together with Generation::step_all; returns each generation's result and
// events.
struct BatchRun {
  std::vector<GenerationResult> results;
  std::vector<std::vector<TokenEvent>> events;
  std::vector<std::vector<int32_t>> committed;
};

BatchRun run_batched(const std::shared_ptr<Model>& model, const SessionOptions& options,
                     int64_t max_tokens) {
  std::vector<std::unique_ptr<Session>> sessions;
  std::vector<std::unique_ptr<Generation>> generations;
  std::vector<Generation*> pointers;
  BatchRun run;
  run.events.resize(kPrompts.size());
  std::vector<std::vector<TokenEvent>*> event_lists;
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    sessions.push_back(std::make_unique<Session>(model, options));
    generations.push_back(
        std::make_unique<Generation>(*sessions.back(), request_for(kPrompts[i], max_tokens)));
    pointers.push_back(generations.back().get());
    event_lists.push_back(&run.events[i]);
  }
  bool running = true;
  while (running) {
    Generation::step_all(pointers, event_lists);
    running = false;
    for (const auto& g : generations) running = running || !g->finished();
  }
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    run.results.push_back(generations[i]->result());
    run.committed.push_back(sessions[i]->tokens());
  }
  return run;
}

TEST(BatchedGeneration, EqualsGeneratingEachAlone) {
  for (const char* name :
       {"llama-dense", "gemma3-dense", "gemma4-dense", "gptoss-moe", "qwen3moe-moe", "gemma4-moe",
        "deepseek2-moe", "laguna-moe", "glmdsa-moe", "deepseek4-moe", "qwen35-hybrid",
        "qwen3next-hybrid", "kimilinear-hybrid"}) {
    if (!std::filesystem::exists(tiny_model(name))) {
      GTEST_SKIP() << "../shared/testdata/llamacpp-tiny absent: " << tiny_model(name);
    }
    auto model = Model::load(tiny_model(name), {2, "cpu"});
    // 5: prompts take several prefill steps, so phases overlap; 16: several prefill chunks
    // share a forward with decode tokens, others run alone.
    for (int64_t n_batch : {5, 16}) {
      SessionOptions options;
      options.n_batch = n_batch;
      options.n_ctx = 128;
      const int64_t max_tokens = 12;
      std::vector<BatchRun> runs = {run_batched(model, options, max_tokens)};
      const bool moe = std::string(name).ends_with("-moe") ||
                       std::string(name) == "qwen3next-hybrid" ||
                       std::string(name) == "kimilinear-hybrid";
      if (moe) {
        ModelOptions streamed{2, "cpu"};
        streamed.stream_experts = true;
        // The floor: expert_used_count of these tiny files (laguna's is 4, glm-dsa's 3).
        streamed.expert_cache_slots = std::string(name) == "laguna-moe"   ? 4
                                      : std::string(name) == "glmdsa-moe" ? 3
                                                                          : 2;
        runs.push_back(run_batched(Model::load(tiny_model(name), streamed), options, max_tokens));
      }

      for (size_t i = 0; i < kPrompts.size(); ++i) {
        Session alone(model, options);
        std::vector<TokenEvent> alone_events;
        const GenerationResult expected =
            alone.generate(request_for(kPrompts[i], max_tokens), [&](const TokenEvent& e) {
              alone_events.push_back(e);
              return true;
            });
        for (size_t r = 0; r < runs.size(); ++r) {
          const std::string where = std::string(name) + (r == 0 ? " resident" : " streamed") +
                                    " n_batch " + std::to_string(n_batch) + " prompt " +
                                    std::to_string(i);
          EXPECT_EQ(runs[r].results[i].tokens, expected.tokens) << where;
          EXPECT_EQ(runs[r].results[i].text, expected.text) << where;
          EXPECT_EQ(logprobs_of(runs[r].events[i]), logprobs_of(alone_events)) << where;
          EXPECT_EQ(runs[r].committed[i], alone.tokens()) << where;
        }
      }
    }
  }
}

}  // namespace
}  // namespace sluice
