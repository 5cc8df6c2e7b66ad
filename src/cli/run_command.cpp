// `sluice run MODEL [-p PROMPT] [--system TEXT] [-n N] [sampling…] [--stop STR]… [--stats]
// [--no-template] [--ctx N] [--threads N] [--kv f16|f32]`: with -p, one answer streamed to
// stdout; without it, an interactive chat (chat_loop.cpp). Parses options and sets up the
// model, the session and the conversation; the answering lives in answer.cpp.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/answer.h"
#include "cli/chat_loop.h"
#include "cli/commands.h"
#include "cli/conversation.h"
#include "cli/engine_options.h"
#include "cli/interrupt.h"
#include "cli/tokenizer_source.h"
#include "sluice/engine.h"
#include "sluice/error.h"

namespace sluice::cli {
namespace {

struct RunArgs {
  std::string model;
  std::optional<std::string> prompt;
  std::string system;
  int64_t max_tokens = -1;
  SamplingParams sampling;
  std::vector<std::string> stops;
  bool stats = false;
  bool no_template = false;
  EngineArgs engine;
};

constexpr const char* kSamplingNote =
    "Sampling is greedy (argmax, deterministic) unless --temperature above 0 is given; top-k, "
    "top-p, min-p, typical-p and the seed matter only then, the penalties always (repeat "
    "penalty 1.1 by default, as Ollama; --repeat-penalty 1 for plain argmax). Without -p: "
    "an interactive chat (/help inside it lists its commands).";

void add_sampling_options(CLI::App& app, SamplingParams& s) {
  app.add_option("--temperature", s.temperature, "Sample at this temperature (0: greedy)")
      ->check(at_least(0));
  app.add_option("--top-k", s.top_k, "Keep the K most likely tokens (0: off)")->check(at_least(0));
  app.add_option("--top-p", s.top_p, "Nucleus: keep the smallest set with mass P (1: off)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--min-p", s.min_p, "Drop tokens below P × the top probability (0: off)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--typical-p", s.typical_p, "Locally typical sampling mass (1: off)")
      ->check(CLI::Range(0.0, 1.0));
  // Small chat models loop on greedy decoding without it; 1.1 over the last 64 tokens is
  // Ollama's default and keeps answers deterministic.
  s.repeat_penalty = 1.1f;
  app.add_option("--repeat-penalty", s.repeat_penalty, "Penalise repeated tokens (1: off)")
      ->check(at_least(1e-6).description(">0"))
      ->capture_default_str();
  app.add_option("--repeat-last-n", s.penalty_last_n, "Window of recent tokens the penalties see")
      ->check(at_least(0))
      ->capture_default_str();
  app.add_option("--presence-penalty", s.presence_penalty, "Subtract P from seen tokens (0: off)");
  app.add_option("--frequency-penalty", s.frequency_penalty,
                 "Subtract F × count from seen tokens (0: off)");
  app.add_option("--seed", s.seed, "Random seed: same seed, same answer")->capture_default_str();
}

// -p: one answer, a newline, exit. Ctrl-C stops the answer and exits 130, as a shell expects.
int answer_once(Session& session, Conversation& conversation, const AnswerSettings& settings,
                const std::string& prompt) {
  conversation.add("user", prompt);
  const std::atomic<bool>* cancel = begin_answer();
  GenerationRequest request = make_request(settings, conversation.tokens(), session.n_ctx());
  GenerationResult result = stream_answer(session, request, cancel);
  const bool cancelled = end_answer();
  std::fputs("\n", stdout);
  finish_stdout();
  if (settings.print_stats) std::fputs(format_stats(result.stats).c_str(), stderr);
  if (result.stop_reason == StopReason::kContextFull) {
    std::fputs("sluice: warning: the answer stopped at the end of the context (--ctx)\n", stderr);
  }
  return cancelled ? 130 : 0;
}

int run_model(const RunArgs& args) {
  std::shared_ptr<Model> model = load_model(args.model, args.engine);
  Conversation conversation(*model, args.system, !args.no_template);
  if (!args.no_template && !conversation.templated()) {
    std::fprintf(stderr,
                 "sluice: warning: '%s' has no chat template; prompts are plain text "
                 "(system, blank line, user)\n",
                 args.model.c_str());
  }
  Session session(model, session_options(args.engine));
  AnswerSettings settings;
  settings.base.sampling = args.sampling;
  settings.base.stop_strings = args.stops;
  settings.max_tokens = args.max_tokens;
  settings.print_stats = args.stats;
  install_interrupt_handler();
  const int code = args.prompt ? answer_once(session, conversation, settings, *args.prompt)
                               : run_chat(session, conversation, settings);
  const ExpertTelemetry experts = model->expert_telemetry();
  if (args.stats && experts.steps > 0) {
    std::fputs(format_expert_telemetry(experts).c_str(), stderr);
  }
  write_expert_outputs(*model, args.engine);
  return code;
}

}  // namespace

Command add_run_command(CLI::App& parent) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* app = parent.add_subcommand("run", "Chat with a model, or answer one prompt (-p)");
  app->footer(kSamplingNote);
  app->add_option("model,--model,-m", args->model, "GGUF file or safetensors snapshot directory")
      ->required();
  app->add_option("--prompt,-p", args->prompt, "Answer this one prompt and exit");
  app->add_option("--system", args->system, "System message (default: the template's own)");
  app->add_option("--max-tokens,-n", args->max_tokens,
                  "Most tokens per answer (-1: until the context is full)")
      ->check(at_least(-1))
      ->capture_default_str();
  add_sampling_options(*app, args->sampling);
  app->add_option("--stop", args->stops, "Stop the answer at this text (repeatable)");
  app->add_flag("--stats", args->stats,
                "After each answer, print prompt and generation speed, time to first token and "
                "peak RSS on stderr");
  app->add_flag("--no-template", args->no_template,
                "Do not apply the chat template; send plain text");
  add_engine_options(*app, args->engine);
  return {app, [args] { return run_model(*args); }};
}

}  // namespace sluice::cli
