// The shared --threads/--ctx/--kv/--backend options and their translation into the public
// ModelOptions and SessionOptions. Values CLI11 can check (ranges, choices) are bad usage
// (exit 2); what only the engine can judge (a backend not built in) is its error.
#include "cli/engine_options.h"

namespace sluice::cli {

CLI::Validator at_least(double min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return "'" + text + "' is not a number";
        if (value < min) return text + " is below " + CLI::detail::to_string(min);
        return {};
      },
      ">=" + CLI::detail::to_string(min));
}

void add_engine_options(CLI::App& app, EngineArgs& args) {
  app.add_option("--threads,-t", args.threads, "CPU threads (0: one per physical core)")
      ->check(at_least(0))
      ->capture_default_str();
  app.add_option("--ctx,-c", args.ctx,
                 "Context length in tokens (capped at the model's; 0: the model's)")
      ->check(at_least(0))
      ->capture_default_str();
  app.add_option("--kv", args.kv, "KV cache element type")
      ->check(CLI::IsMember({"f16", "f32"}))
      ->capture_default_str();
  app.add_option("--backend", args.backend, "Where the model runs")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
}

ModelOptions model_options(const EngineArgs& args) {
  ModelOptions options;
  options.n_threads = args.threads;
  options.backend = args.backend;
  return options;
}

SessionOptions session_options(const EngineArgs& args) {
  SessionOptions options;
  options.n_ctx = args.ctx;
  options.kv_type = args.kv == "f32" ? KvType::kF32 : KvType::kF16;
  return options;
}

}  // namespace sluice::cli
