// `sluice convert HF_DIR -o OUT.gguf [--type T] [--expert-type T]`: a Hugging Face snapshot to a
// GGUF that llama.cpp and Sluice load, with a progress line on stderr for big outputs.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/progress_line.h"
#include "sluice/convert.h"

namespace sluice::cli {
namespace {

struct ConvertArgs {
  std::string snapshot;
  std::string out;
  ConvertOptions options;
};

int run_convert(const ConvertArgs& args) {
  ProgressLine progress("convert");
  convert_hf_snapshot(args.snapshot, args.out, args.options,
                      [&](uint64_t done, uint64_t total) { progress.update(done, total); });
  std::printf("wrote %s\n", args.out.c_str());
  return 0;
}

}  // namespace

Command add_convert_command(CLI::App& parent) {
  auto args = std::make_shared<ConvertArgs>();
  CLI::App* app = parent.add_subcommand(
      "convert",
      "Convert a Hugging Face safetensors snapshot to GGUF (llama.cpp's names and keys)");
  app->add_option("snapshot", args->snapshot,
                  "Snapshot directory: config.json, *.safetensors, tokenizer.json")
      ->required();
  app->add_option("--out,-o", args->out, "Output GGUF file")->required();
  app->add_option("--type", args->options.type,
                  "Weight type: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K (default: BF16 for a "
                  "BF16 snapshot, else F16; norms, biases and routers stay F32)");
  app->add_option("--expert-type", args->options.expert_type,
                  "Type of the routed experts of a MoE model (default: --type)");
  return {app, [args] { return run_convert(*args); }};
}

}  // namespace sluice::cli
