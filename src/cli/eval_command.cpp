// `sluice eval --model FILE --tokens 1,5,9,… [--all-positions] [--logits-out PATH] [--json]
// [--greedy N] [--threads N] [--ctx N] [--kv f16|f32] [--backend cpu]`: the raw-numbers entry
// point for parity tests and tools. The ids go into a fresh session exactly as given (no
// template, no BOS) and the logits come out exactly as computed.
#include <charconv>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/activation_dump.h"
#include "cli/commands.h"
#include "cli/engine_options.h"
#include "cli/logits_output.h"
#include "cli/tokenizer_source.h"
#include "sluice/engine.h"
#include "sluice/error.h"

namespace sluice::cli {
namespace {

struct EvalArgs {
  std::string model;
  std::string tokens;
  bool all_positions = false;
  bool json = false;
  std::string logits_out;
  int greedy = 0;
  std::string dump_activations;
  EngineArgs engine;
};

// "1,5,9" → ids; an empty list, a piece that is not a decimal id or one past int32 is refused
// with the piece named.
std::vector<int32_t> parse_token_list(const std::string& text, std::string& problem) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string piece = text.substr(start, end - start);
    int32_t id = 0;
    auto [ptr, ec] = std::from_chars(piece.data(), piece.data() + piece.size(), id);
    if (piece.empty() || ec != std::errc() || ptr != piece.data() + piece.size() || id < 0) {
      problem = "'" + piece + "' is not a token id (expected ID,ID,… e.g. 1,5,9)";
      return {};
    }
    ids.push_back(id);
    start = end + 1;
  }
  return ids;
}

std::string check_token_list(std::string& text) {
  std::string problem;
  parse_token_list(text, problem);
  return problem;
}

// N argmax steps after the prompt, each chosen token evaluated at the next position so the
// following step sees it (the same procedure as the llama.cpp reference continuations).
std::vector<int32_t> greedy_steps(Session& session, std::vector<float> last, int steps) {
  std::vector<int32_t> chosen;
  for (int step = 0; step < steps; ++step) {
    const int32_t id = argmax(last);
    chosen.push_back(id);
    if (step + 1 < steps) last = session.eval(std::span<const int32_t>(&id, 1));
  }
  return chosen;
}

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out;
}

int run_eval(const EvalArgs& args) {
  std::string problem;
  const std::vector<int32_t> ids = parse_token_list(args.tokens, problem);
  std::shared_ptr<Model> model = load_model(args.model, args.engine);
  const int64_t n_vocab = model->info().n_vocab;
  for (int32_t id : ids) {
    if (id >= n_vocab) {
      throw Error("token id " + std::to_string(id) + " is outside the vocabulary of '" +
                  args.model + "' (n_vocab " + std::to_string(n_vocab) + ")");
    }
  }
  Session session(model, session_options(args.engine));
  ActivationDump dump(args.dump_activations);
  if (!args.dump_activations.empty()) {
    session.set_activation_callback([&dump](std::string_view name, int64_t layer, const float* data,
                                            int64_t n,
                                            int64_t row) { dump.add(name, layer, data, n, row); });
  }
  const std::vector<float> logits = session.eval(ids, args.all_positions);
  if (!args.dump_activations.empty()) {
    session.set_activation_callback({});
    dump.write();
  }
  const std::span<const float> last(logits.data() + logits.size() - n_vocab,
                                    static_cast<size_t>(n_vocab));
  const std::vector<int32_t> greedy =
      greedy_steps(session, std::vector<float>(last.begin(), last.end()), args.greedy);

  if (!args.logits_out.empty()) write_logits_file(args.logits_out, logits);
  std::string out;
  if (args.json) {
    out = logits_json(n_vocab, static_cast<int64_t>(ids.size()), logits, greedy);
  } else {
    if (args.logits_out.empty()) {
      out = "n_vocab " + std::to_string(n_vocab) + ", " + std::to_string(ids.size()) +
            " tokens; top 5 logits of the last position:\n" + top_logits_summary(last, 5);
    }
    if (args.greedy > 0) out += "greedy: " + join_ids(greedy) + "\n";
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  finish_stdout();
  write_expert_outputs(*model, args.engine);
  return 0;
}

}  // namespace

Command add_eval_command(CLI::App& parent) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* app = parent.add_subcommand(
      "eval", "Evaluate token ids (no template, no BOS) and print or write the logits");
  app->add_option("--model,-m", args->model, "GGUF file or safetensors snapshot")->required();
  app->add_option("--tokens", args->tokens, "Token ids to evaluate, comma-separated: 1,5,9")
      ->required()
      ->check(CLI::Validator(check_token_list, "ID,ID,…"));
  app->add_flag("--all-positions", args->all_positions,
                "Logits of every position, not only the last");
  app->add_option("--logits-out", args->logits_out,
                  "Write the logits as raw little-endian float32, positions × n_vocab row-major");
  app->add_flag("--json", args->json,
                "Print {\"n_vocab\", \"n_tokens\", \"logits\": [[…]], \"greedy_tokens\"} as JSON");
  app->add_option("--greedy", args->greedy,
                  "Also take N greedy (argmax) steps after the prompt and report their ids")
      ->check(at_least(0));
  app->add_option("--dump-activations", args->dump_activations,
                  "Write every intermediate tensor of the prompt as DIR/<name>-<layer>.npy");
  add_engine_options(*app, args->engine);
  return {app, [args] { return run_eval(*args); }};
}

}  // namespace sluice::cli
