// Session invariants on llama.cpp's tiny models (../shared/testdata/llamacpp-tiny): chunk size
// never changes logits, prefix reuse gives the logits of a fresh evaluation bit for bit
// (including sliding-window gemma3, whose ring may force a restart, and the recurrent hybrids,
// which may only continue their whole cached sequence), the context limit is a clear error, and
// the activation observer sees every layer.
#include <gtest/gtest.h>

#include <filesystem>

#include "format/gguf/gguf_writer.h"
#include "sluice/engine.h"
#include "sluice/error.h"

namespace sluice {
namespace {

std::string tiny_model(const std::string& name) {
  return std::string(SLUICE_TESTDATA_DIR) + "/llamacpp-tiny/" + name + ".gguf";
}

#define REQUIRE_TINY(name)                                                           \
  if (!std::filesystem::exists(tiny_model(name))) {                                  \
    GTEST_SKIP() << "../shared/testdata/llamacpp-tiny absent: " << tiny_model(name); \
  }

const std::vector<int32_t> kPrompt = {1, 5, 9, 17, 33, 64, 2, 100, 7, 3, 50, 27};

std::vector<float> eval_with_batch(const std::shared_ptr<Model>& model, int64_t n_batch) {
  SessionOptions options;
  options.n_batch = n_batch;
  options.kv_type = KvType::kF32;
  Session session(model, options);
  return session.eval(kPrompt, /*all_positions=*/true);
}

TEST(Session, ChunkSizeDoesNotChangeLogits) {
  for (const char* name : {"llama-dense", "gemma3-dense", "qwen35-hybrid", "qwen3next-hybrid"}) {
    REQUIRE_TINY(name);
    auto model = Model::load(tiny_model(name), {1, "cpu"});
    const auto whole = eval_with_batch(model, 64);
    EXPECT_EQ(eval_with_batch(model, 5), whole) << name;
    EXPECT_EQ(eval_with_batch(model, 1), whole) << name;
  }
}

// append() + last_logits() is eval() without the copy: the same logits, after a prefill chunk
// and after single tokens, and the last row of an all-positions eval.
TEST(Session, AppendLeavesTheLogitsEvalReturns) {
  REQUIRE_TINY("llama-dense");
  auto model = Model::load(tiny_model("llama-dense"), {1, "cpu"});
  SessionOptions options;
  options.n_batch = 5;
  Session appended(model, options), evaluated(model, options), all(model, options);
  appended.append(kPrompt);
  const std::vector<float> whole = all.eval(kPrompt, /*all_positions=*/true);
  const std::vector<float> last(whole.end() - model->info().n_vocab, whole.end());
  const std::span<const float> got = appended.last_logits();
  EXPECT_EQ(std::vector<float>(got.begin(), got.end()), evaluated.eval(kPrompt));
  EXPECT_EQ(std::vector<float>(got.begin(), got.end()), last);
  const std::span<const float> after_all = all.last_logits();
  EXPECT_EQ(std::vector<float>(after_all.begin(), after_all.end()), last);
  for (int32_t id : {7, 8, 9}) {
    appended.append(std::vector<int32_t>{id});
    const std::vector<float> expected = evaluated.eval(std::vector<int32_t>{id});
    const std::span<const float> row = appended.last_logits();
    EXPECT_EQ(std::vector<float>(row.begin(), row.end()), expected) << "token " << id;
  }
  EXPECT_THROW(appended.append({}), Error);
}

TEST(Session, PrefixReuseGivesFreshLogits) {
  for (const char* name : {"qwen3-dense", "gemma3-dense", "qwen35-hybrid"}) {
    REQUIRE_TINY(name);
    auto model = Model::load(tiny_model(name), {2, "cpu"});
    SessionOptions options;
    options.n_batch = 4;
    Session reused(model, options);
    GenerationRequest request;
    request.max_tokens = 6;
    request.prompt = {kPrompt.begin(), kPrompt.begin() + 8};
    const GenerationResult first = reused.generate(request);
    // The next turn: the whole first exchange plus new tokens.
    request.prompt.insert(request.prompt.end(), first.tokens.begin(), first.tokens.end());
    request.prompt.insert(request.prompt.end(), {40, 41, 42});
    const GenerationResult second = reused.generate(request);
    Session fresh(model, options);
    const GenerationResult expected = fresh.generate(request);
    EXPECT_EQ(second.tokens, expected.tokens) << name;
    EXPECT_EQ(expected.stats.n_prompt_reused, 0);
    // gemma3's ring (window 6 + batch 4 - 1 = 9 cells) cannot keep 14 tokens: it restarts.
    // The recurrent hybrid continues: the new prompt extends its whole cached sequence.
    if (std::string(name) != "gemma3-dense") {
      EXPECT_GT(second.stats.n_prompt_reused, 8) << name;
    }
    const auto a = reused.eval(std::vector<int32_t>{7});
    const auto b = fresh.eval(std::vector<int32_t>{7});
    EXPECT_EQ(a, b) << name;
  }
}

// A recurrent model's state holds its whole cached sequence folded together and cannot be cut
// back: a prompt that shares only part of it restarts from scratch, and gives exactly what a cold
// evaluation gives; copying a partial prefix is refused, copying the whole sequence continues
// like an evaluated one.
TEST(Session, RecurrentModelRestartsOnAPartialPrefix) {
  for (const char* name : {"qwen35-hybrid", "qwen3next-hybrid"}) {
    REQUIRE_TINY(name);
    auto model = Model::load(tiny_model(name), {2, "cpu"});
    SessionOptions options;
    options.n_batch = 4;
    options.kv_type = KvType::kF32;
    Session reused(model, options), fresh(model, options);
    reused.eval(kPrompt);
    std::vector<int32_t> partial(kPrompt.begin(), kPrompt.begin() + 8);
    partial.insert(partial.end(), {40, 41, 42});
    std::vector<int32_t> longer = kPrompt;
    longer.push_back(40);
    EXPECT_EQ(reused.reusable_prefix(partial), 0) << name;
    EXPECT_EQ(reused.reusable_prefix(longer), int64_t(kPrompt.size())) << name;

    GenerationRequest request;
    request.prompt = partial;
    request.max_tokens = 4;
    request.logprobs = true;
    std::vector<float> reused_logprobs, fresh_logprobs;
    const GenerationResult got = reused.generate(request, [&](const TokenEvent& e) {
      reused_logprobs.push_back(e.logprob);
      return true;
    });
    const GenerationResult expected = fresh.generate(request, [&](const TokenEvent& e) {
      fresh_logprobs.push_back(e.logprob);
      return true;
    });
    EXPECT_EQ(got.stats.n_prompt_reused, 0) << name;
    EXPECT_EQ(got.tokens, expected.tokens) << name;
    EXPECT_EQ(reused_logprobs, fresh_logprobs) << name;
    EXPECT_EQ(reused.tokens(), fresh.tokens()) << name;
    EXPECT_EQ(reused.eval(std::vector<int32_t>{7}), fresh.eval(std::vector<int32_t>{7})) << name;

    Session source(model, options), copied(model, options), evaluated(model, options);
    source.eval(kPrompt);
    EXPECT_THROW(copied.copy_prefix_from(source, 8), Error) << name;
    copied.copy_prefix_from(source, int64_t(kPrompt.size()));
    evaluated.eval(kPrompt);
    EXPECT_EQ(copied.eval(std::vector<int32_t>{7, 3}, true),
              evaluated.eval(std::vector<int32_t>{7, 3}, true))
        << name;
  }
}

TEST(Session, ContextOverflowIsAClearError) {
  REQUIRE_TINY("llama-dense");
  auto model = Model::load(tiny_model("llama-dense"), {1, "cpu"});
  SessionOptions options;
  options.n_ctx = 10;
  Session session(model, options);
  try {
    session.eval(kPrompt);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context full"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(session.tokens().empty());
}

TEST(Session, GenerationIsDeterministicAndHonoursMaxTokens) {
  REQUIRE_TINY("qwen2-dense");
  auto model = Model::load(tiny_model("qwen2-dense"), {2, "cpu"});
  GenerationRequest request;
  request.prompt = kPrompt;
  request.max_tokens = 5;
  request.sampling.temperature = 0.8f;
  request.sampling.seed = 42;
  Session a(model), b(model);
  const auto ra = a.generate(request);
  const auto rb = b.generate(request);
  EXPECT_EQ(ra.tokens, rb.tokens);
  EXPECT_LE(ra.tokens.size(), 5u);
}

TEST(Model, UnknownArchitectureIsRefusedByName) {
  const std::string path = ::testing::TempDir() + "/unknown_arch.gguf";
  GgufWriter writer;
  writer.add_metadata("general.architecture", MetaValue::string("no-such-arch"));
  writer.write(path);
  try {
    Model::load(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown architecture 'no-such-arch'"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

// A session given another's prefix (copy_prefix_from) continues exactly as one that evaluated
// that prefix itself: same logits bit for bit, for full attention and sliding-window rings.
TEST(Session, CopiedPrefixContinuesLikeAnEvaluatedOne) {
  for (const char* name : {"llama-dense", "gemma3-dense"}) {
    REQUIRE_TINY(name);
    auto model = Model::load(tiny_model(name), {1, "cpu"});
    SessionOptions options;
    options.n_batch = 4;
    options.n_ctx = 64;
    options.kv_type = KvType::kF32;
    const std::vector<int32_t> shared = {1, 5, 9, 17, 33, 64, 2, 100};
    std::vector<int32_t> first = shared, second = shared;
    first.insert(first.end(), {7, 3, 50, 27});
    second.insert(second.end(), {8, 8, 4});

    Session source(model, options), copied(model, options), fresh(model, options);
    source.eval(first);
    copied.copy_prefix_from(source, int64_t(shared.size()));
    EXPECT_EQ(copied.tokens(), shared) << name;
    fresh.eval(shared);
    const std::span<const int32_t> rest(second.begin() + int64_t(shared.size()), second.end());
    EXPECT_EQ(copied.eval(rest, true), fresh.eval(rest, true)) << name;
    EXPECT_THROW(copied.copy_prefix_from(source, 100), Error) << name;
  }
}

}  // namespace
}  // namespace sluice
