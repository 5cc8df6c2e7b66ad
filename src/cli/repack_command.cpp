// `sluice repack MODEL.gguf [-o OUT] [--order coactivation --profile FILE]`: writes the
// expert-major sidecar (default MODEL.gguf.experts, where the engine finds it) with a progress
// line on stderr; ordered by co-activation, experts a saved profile saw chosen together are
// stored side by side.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/progress_line.h"
#include "sluice/error.h"
#include "sluice/repack.h"

namespace sluice::cli {
namespace {

struct RepackArgs {
  std::string model;
  std::string out;
  std::string order = "id";
  std::string profile;
};

int run_repack(const RepackArgs& args) {
  const std::string out = args.out.empty() ? expert_sidecar_path(args.model) : args.out;
  if ((args.order == "coactivation") != !args.profile.empty())
    throw Error("repack: --order coactivation and --profile FILE go together");
  ProgressLine progress("repack");
  repack_experts(
      args.model, out, [&](uint64_t done, uint64_t total) { progress.update(done, total); },
      args.profile);
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

}  // namespace

Command add_repack_command(CLI::App& parent) {
  auto args = std::make_shared<RepackArgs>();
  CLI::App* app = parent.add_subcommand(
      "repack", "Write a MoE model's expert-major sidecar: one aligned read per expert");
  app->add_option("model", args->model, "GGUF file of a Mixture-of-Experts model")->required();
  app->add_option("--out,-o", args->out,
                  "Output file (default: MODEL.experts, used automatically)");
  app->add_option("--order", args->order,
                  "Experts of a layer in id order, or experts chosen together side by side")
      ->check(CLI::IsMember({"id", "coactivation"}))
      ->capture_default_str();
  app->add_option("--profile", args->profile,
                  "Expert profile a run saved (--expert-profile-out), for --order coactivation");
  return {app, [args] { return run_repack(*args); }};
}

}  // namespace sluice::cli
