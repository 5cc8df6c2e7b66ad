// The options every subcommand that drives the engine shares (`run`, `eval`): where the model
// runs and how large its session is. One place, so `eval` accepts exactly `run`'s placement
// options, as parity tools expect.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "sluice/engine.h"

namespace sluice::cli {

struct EngineArgs {
  int threads = 0;
  int64_t ctx = 4096;
  std::string kv = "f16";
  std::string backend = "cpu";
};

// A CLI11 check that a number is at least `min`, with a short message (CLI11's own ranges
// print the largest double).
CLI::Validator at_least(double min);

void add_engine_options(CLI::App& app, EngineArgs& args);
ModelOptions model_options(const EngineArgs& args);
SessionOptions session_options(const EngineArgs& args);

}  // namespace sluice::cli
