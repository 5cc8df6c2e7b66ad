// The server's scheduler on llama.cpp's tiny models: jobs beyond --parallel wait and all finish
// with exactly the tokens each would get alone (batched decode changes no number); a full queue
// refuses; a resent conversation reuses its cached prefix; a cancelled job ends as cancelled and
// frees its slot; shutdown fails what is still queued.
#include <gtest/gtest.h>

#include <filesystem>

#include "server/scheduler.h"

namespace sluice::server {
namespace {

std::string tiny_model(const std::string& name) {
  return std::string(SLUICE_TESTDATA_DIR) + "/llamacpp-tiny/" + name + ".gguf";
}

#define REQUIRE_TINY(name)                                                           \
  if (!std::filesystem::exists(tiny_model(name))) {                                  \
    GTEST_SKIP() << "../shared/testdata/llamacpp-tiny absent: " << tiny_model(name); \
  }

Job job_for(std::vector<int32_t> prompt, int64_t max_tokens) {
  Job job;
  job.request.prompt = std::move(prompt);
  job.request.max_tokens = max_tokens;
  return job;
}

GenerationResult wait(JobChannel& channel) {
  std::vector<TokenEvent> events;
  while (!channel.wait(events, std::chrono::milliseconds(100))) {
  }
  EXPECT_FALSE(channel.failed()) << channel.error();
  return channel.result();
}

SessionOptions small_sessions() {
  SessionOptions options;
  options.n_ctx = 96;
  options.n_batch = 8;
  return options;
}

TEST(Scheduler, ParallelJobsGetTheTokensTheyWouldGetAlone) {
  REQUIRE_TINY("qwen3-dense");
  auto model = Model::load(tiny_model("qwen3-dense"), {2, "cpu"});
  const std::vector<std::vector<int32_t>> prompts = {
      {1, 5, 9, 17}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {1, 99}, {1, 7, 7, 7, 7}, {1, 3}};
  std::vector<GenerationResult> alone;
  for (const auto& prompt : prompts) {
    Session session(model, small_sessions());
    alone.push_back(session.generate(job_for(prompt, 10).request));
  }
  Scheduler scheduler(model, small_sessions(), {2, 3, 8});
  std::vector<std::shared_ptr<JobChannel>> channels;
  for (const auto& prompt : prompts) {
    Job job = job_for(prompt, 10);
    channels.push_back(job.channel);
    ASSERT_EQ(scheduler.submit(std::move(job)), Scheduler::Admission::kQueued);
  }
  uint64_t generated = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(wait(*channels[i]).tokens, alone[i].tokens) << "prompt " << i;
    generated += alone[i].tokens.size();
  }
  scheduler.shutdown(10);  // the engine retires the last job just after its channel ends
  const SchedulerCounts counts = scheduler.counts();
  EXPECT_LE(counts.sessions, 3);
  EXPECT_EQ(counts.active, 0);
  EXPECT_EQ(counts.generated_tokens, generated);
}

TEST(Scheduler, FullQueueRefusesAndResentHistoryIsReused) {
  REQUIRE_TINY("llama-dense");
  auto model = Model::load(tiny_model("llama-dense"), {1, "cpu"});
  Scheduler scheduler(model, small_sessions(), {1, 2, 1});
  Job first = job_for({1, 5, 9, 17, 33, 64}, 40);
  Job queued = job_for({1, 2}, 1);
  Job refused = job_for({1, 3}, 1);
  auto first_channel = first.channel, queued_channel = queued.channel;
  auto third_channel = refused.channel;
  ASSERT_EQ(scheduler.submit(std::move(first)), Scheduler::Admission::kQueued);
  // One generating (or about to) and one waiting fill it; the third is refused unless the tiny
  // model already finished the first.
  Scheduler::Admission second = scheduler.submit(std::move(queued));
  Scheduler::Admission third = scheduler.submit(std::move(refused));
  EXPECT_EQ(second, Scheduler::Admission::kQueued);
  EXPECT_TRUE(third == Scheduler::Admission::kQueueFull || third == Scheduler::Admission::kQueued);
  const GenerationResult answer = wait(*first_channel);
  wait(*queued_channel);
  // Admitted (the first had finished): it must leave the queue too, or the follow-up below finds
  // it full on a slow machine.
  if (third == Scheduler::Admission::kQueued) wait(*third_channel);

  // The conversation resent with the answer and a new turn: its prefix comes from the cache.
  std::vector<int32_t> resent = {1, 5, 9, 17, 33, 64};
  resent.insert(resent.end(), answer.tokens.begin(), answer.tokens.end());
  resent.push_back(42);
  Job follow_up = job_for(resent, 2);
  follow_up.session = "conversation-1";
  auto follow_channel = follow_up.channel;
  ASSERT_EQ(scheduler.submit(std::move(follow_up)), Scheduler::Admission::kQueued);
  EXPECT_GE(wait(*follow_channel).stats.n_prompt_reused, 6);
}

TEST(Scheduler, CancelledJobEndsAndShutdownFailsTheQueue) {
  REQUIRE_TINY("llama-dense");
  auto model = Model::load(tiny_model("llama-dense"), {1, "cpu"});
  auto scheduler = std::make_unique<Scheduler>(model, small_sessions(), SchedulerLimits{1, 1, 4});
  Job running = job_for({1, 5, 9}, 80);
  running.channel->cancel = true;  // cancelled before or during its first steps
  auto running_channel = running.channel;
  scheduler->submit(std::move(running));
  std::vector<TokenEvent> events;
  while (!running_channel->wait(events, std::chrono::milliseconds(100))) {
  }
  EXPECT_TRUE(running_channel->failed() ||
              running_channel->result().stop_reason == StopReason::kCancelled);

  Job next = job_for({1, 6}, 3);
  auto next_channel = next.channel;
  scheduler->submit(std::move(next));
  EXPECT_EQ(wait(*next_channel).tokens.size(), 3u);  // the slot was freed
  scheduler->shutdown(5);
  EXPECT_EQ(scheduler->submit(job_for({1, 2}, 1)), Scheduler::Admission::kStopping);
}

}  // namespace
}  // namespace sluice::server

namespace sluice::server {
namespace {

// Two conversations that share a system prompt: the second takes a fresh session with the
// shared prefix copied in, so the first keeps its whole cache for its next turn.
TEST(Scheduler, ConversationsSharingAPrefixBothStayCached) {
  REQUIRE_TINY("llama-dense");
  auto model = Model::load(tiny_model("llama-dense"), {1, "cpu"});
  Scheduler scheduler(model, small_sessions(), {1, 4, 4});
  const std::vector<int32_t> system = {1, 5, 9, 17, 33, 64, 2, 100, 7, 3};
  std::vector<int32_t> a = system, b = system;
  a.insert(a.end(), {40, 41, 42});
  b.insert(b.end(), {50, 51});

  auto run = [&](std::vector<int32_t> prompt) {
    Job job = job_for(std::move(prompt), 4);
    auto channel = job.channel;
    EXPECT_EQ(scheduler.submit(std::move(job)), Scheduler::Admission::kQueued);
    return wait(*channel);
  };
  const GenerationResult first_a = run(a);
  const GenerationResult first_b = run(b);
  EXPECT_GE(first_b.stats.n_prompt_reused, int64_t(system.size()));  // the copied prefix
  std::vector<int32_t> next_a = a;
  next_a.insert(next_a.end(), first_a.tokens.begin(), first_a.tokens.end());
  next_a.push_back(60);
  const GenerationResult second_a = run(next_a);
  // All of a and its answer but the answer's last token (never evaluated) came from the cache.
  EXPECT_EQ(second_a.stats.n_prompt_reused, int64_t(a.size() + first_a.tokens.size() - 1));
}

}  // namespace
}  // namespace sluice::server
