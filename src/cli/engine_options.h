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
  std::string backend = "auto";
  bool cpu_rounding = false;
  // Placement of a MoE model's routed experts.
  std::string ram_budget;   // "24G", "512MiB", bytes; empty: the default
  std::string vram_budget;  // the same for device memory (CUDA)
  int64_t gpu_expert_cache = 0;
  bool cpu_moe = false;
  bool gpu_moe = false;
  bool stream_experts = false;
  int64_t expert_cache = 0;
  std::string io_engine = "auto";
  int queue_depth = 32;
  bool buffered_io = false;
  bool no_prefetch = false;
  std::string eviction = "lru-frequency";
  std::string pools = "size";
  std::string expert_profile;      // a saved expert profile to read
  bool expert_prewarm = false;     // load its most used experts before the first token
  std::string expert_profile_out;  // save this run's expert profile here at exit
  bool explain = false;
  std::string stats_json;  // write the expert telemetry here at exit
};

// A CLI11 check that a number is at least `min`, with a short message (CLI11's own ranges
// print the largest double).
CLI::Validator at_least(double min);

void add_engine_options(CLI::App& app, EngineArgs& args);
ModelOptions model_options(const EngineArgs& args);
SessionOptions session_options(const EngineArgs& args);

// Model::load with these options; prints the placement plan to stderr under --explain.
std::shared_ptr<Model> load_model(const std::string& path, const EngineArgs& args);
// "1.5G", "512MiB", "4096" → bytes; a sluice::Error naming `flag` and the text otherwise.
uint64_t parse_byte_size(const std::string& text, const char* flag);
// The expert path's counters as text (for --stats).
std::string format_expert_telemetry(const ExpertTelemetry& telemetry);
// What a run leaves behind about its experts, once it is done: the profile under
// --expert-profile-out and the counters as JSON under --stats-json (each only when asked for).
void write_expert_outputs(const Model& model, const EngineArgs& args);

}  // namespace sluice::cli
