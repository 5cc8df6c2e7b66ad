// `sluice dump FILE TENSOR [--out PATH]`: one tensor as little-endian float32 in storage order
// (first dimension fastest), to PATH or stdout.
#include <memory>
#include <string>

#include "cli/commands.h"
#include "sluice/model_file_info.h"

namespace sluice::cli {
namespace {

struct DumpOptions {
  std::string path;
  std::string tensor;
  std::string out;
};

}  // namespace

Command add_dump_command(CLI::App& parent) {
  auto options = std::make_shared<DumpOptions>();
  CLI::App* app = parent.add_subcommand("dump", "Write one tensor as float32 (little-endian)");
  app->add_option("file", options->path, "GGUF file, .safetensors file or snapshot directory")
      ->required();
  app->add_option("tensor", options->tensor, "Tensor name")->required();
  app->add_option("--out,-o", options->out, "Output file (default: stdout)");
  return {app, [options] {
            dump_tensor_f32(options->path, options->tensor, options->out);
            return 0;
          }};
}

}  // namespace sluice::cli
