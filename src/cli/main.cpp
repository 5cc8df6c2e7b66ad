// sluice: the command-line entry. It only dispatches to one subcommand per file; every
// subcommand uses the public API in include/sluice and nothing below it. Exit codes: 0 success,
// 1 a user error (one line on stderr), 2 bad usage.
#include <csignal>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "sluice/error.h"
#include "sluice/version.h"

namespace {

// One line on stderr, whatever the message holds.
int report(std::string message, int code) {
  for (char& c : message) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::fprintf(stderr, "sluice: error: %s\n", message.c_str());
  return code;
}

int run(int argc, char** argv) {
  CLI::App app{"Sluice: LLM inference engine", "sluice"};
  app.set_version_flag("--version", std::string("sluice ") + sluice::version());
  app.require_subcommand(1);
  std::vector<sluice::cli::Command> commands = {
      sluice::cli::add_inspect_command(app),  sluice::cli::add_dump_command(app),
      sluice::cli::add_tokenize_command(app), sluice::cli::add_detokenize_command(app),
      sluice::cli::add_template_command(app), sluice::cli::add_run_command(app),
      sluice::cli::add_eval_command(app),     sluice::cli::add_bench_command(app),
      sluice::cli::add_synth_command(app),    sluice::cli::add_repack_command(app),
      sluice::cli::add_convert_command(app),  sluice::cli::add_serve_command(app),
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return report(std::string(e.what()) + " (run with --help for usage)", 2);
  }
  for (auto& command : commands) {
    if (command.app->parsed()) return command.run();
  }
  return report("no subcommand given (run with --help for usage)", 2);
}

}  // namespace

int main(int argc, char** argv) {
  // A reader that closes the pipe early (`sluice dump … | head`) must give a write error and
  // exit 1 with a message, not kill the process with a signal.
  std::signal(SIGPIPE, SIG_IGN);
  try {
    return run(argc, argv);
  } catch (const sluice::Error& e) {
    return report(e.what(), 1);
  } catch (const std::exception& e) {
    return report(e.what(), 1);
  } catch (...) {
    return report("unknown failure", 1);
  }
}
