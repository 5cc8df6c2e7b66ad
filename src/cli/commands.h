// The subcommands of the sluice CLI. Each file adds its own CLI11 subcommand and returns how to
// run it once parsing succeeded; main.cpp only dispatches. Uses include/sluice alone.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace sluice::cli {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;  // returns the exit code; throws sluice::Error for user errors
};

Command add_inspect_command(CLI::App& parent);
Command add_dump_command(CLI::App& parent);
Command add_tokenize_command(CLI::App& parent);
Command add_detokenize_command(CLI::App& parent);
Command add_template_command(CLI::App& parent);
Command add_eval_command(CLI::App& parent);
Command add_run_command(CLI::App& parent);
Command add_bench_command(CLI::App& parent);
Command add_synth_command(CLI::App& parent);
Command add_repack_command(CLI::App& parent);
Command add_convert_command(CLI::App& parent);
Command add_serve_command(CLI::App& parent);

}  // namespace sluice::cli
