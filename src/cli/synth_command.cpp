// `sluice synth --geometry NAME -o OUT.gguf [--type T] [--expert-type T] [--seed N]
// [--layers N]`: writes a synthetic model (a real family's layout, random weights) for tests and
// benchmarks, with a progress line on stderr for big files and a one-line summary on stdout.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/progress_line.h"
#include "sluice/synthetic_model.h"

namespace sluice::cli {
namespace {

using Clock = std::chrono::steady_clock;

std::string join(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

struct SynthOptions {
  SyntheticModelOptions model;
  std::string out;
};

}  // namespace

Command add_synth_command(CLI::App& parent) {
  auto options = std::make_shared<SynthOptions>();
  CLI::App* app = parent.add_subcommand(
      "synth", "Write a synthetic GGUF model: a real family's layout with random weights");
  app->add_option("--geometry,-g", options->model.geometry,
                  "Model layout: " + join(synthetic_geometry_names()))
      ->required();
  app->add_option("--out,-o", options->out, "Output GGUF file (written atomically)")->required();
  app->add_option("--type", options->model.type,
                  "Type of the matrices outside the experts: F32, F16, BF16, Q8_0, Q4_0, Q4_K, "
                  "Q6_K, MXFP4, Q2_K, IQ2_XXS (default: the geometry's)");
  app->add_option("--expert-type", options->model.expert_type,
                  "Type of the routed-expert tensors (default: --type, or the geometry's)");
  app->add_option("--seed", options->model.seed, "Random seed; the same seed gives the same file")
      ->default_val(0);
  app->add_option("--layers", options->model.layers, "Layer count (default: the geometry's)")
      ->check(CLI::Range(1u, 4096u));
  return {app, [options] {
            ProgressLine progress("synth");
            const auto start = Clock::now();
            const SyntheticModelSummary summary = write_synthetic_model(
                options->out, options->model,
                [&](uint64_t done, uint64_t total) { progress.update(done, total); });
            const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
            std::printf(
                "wrote %s (%s, %u layers, %s, experts %s): %llu tensors, %.3f GB in %.1f s "
                "(%.0f MB/s)\n",
                summary.path.c_str(), summary.architecture.c_str(), summary.layers,
                summary.type.c_str(), summary.expert_type.c_str(),
                static_cast<unsigned long long>(summary.tensors), double(summary.file_bytes) / 1e9,
                seconds, seconds > 0 ? double(summary.file_bytes) / 1e6 / seconds : 0.0);
            return 0;
          }};
}

}  // namespace sluice::cli
