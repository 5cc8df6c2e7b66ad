// The shared --threads/--ctx/--kv/--backend options and their translation into the public
// ModelOptions and SessionOptions. Values CLI11 can check (ranges, choices) are bad usage
// (exit 2); what only the engine can judge (a backend not built in) is its error.
#include "cli/engine_options.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "sluice/error.h"

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
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_flag("--cpu-rounding", args.cpu_rounding,
               "On CUDA, round as the CPU backend does: the same tokens as --backend cpu, slower "
               "prefill");
  app.add_option("--ram-budget", args.ram_budget,
                 "RAM the model may use, e.g. 16G (default: available minus max(10%, 2 GiB))");
  app.add_flag("--stream-experts", args.stream_experts,
               "Stream routed experts from disk even when the model fits");
  app.add_option("--vram-budget", args.vram_budget,
                 "Device memory the model may use with --backend cuda, e.g. 40G (default: free "
                 "memory minus 2 GiB)");
  app.add_option("--gpu-expert-cache", args.gpu_expert_cache,
                 "Device slots for routed experts (default: every expert on the device when they "
                 "fit --vram-budget, else as many slots as it holds)")
      ->check(at_least(0));
  CLI::Option* cpu_moe =
      app.add_flag("--cpu-moe", args.cpu_moe,
                   "Compute the routed experts on the CPU from RAM, everything else on the "
                   "backend (hybrid placement, as llama.cpp's --cpu-moe)");
  app.add_flag("--gpu-moe", args.gpu_moe,
               "Keep the routed experts on the GPU's tier even when the measured rates favour "
               "the CPU (default: the planner chooses)")
      ->excludes(cpu_moe);
  app.add_option("--expert-cache", args.expert_cache,
                 "Expert cache slots (default: as many as the budget holds)")
      ->check(at_least(0));
  app.add_option("--io-engine", args.io_engine, "How streamed experts are read")
      ->check(CLI::IsMember({"auto", "io_uring", "pread"}))
      ->capture_default_str();
  app.add_option("--queue-depth", args.queue_depth, "Expert reads in flight at once")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_flag("--buffered-io", args.buffered_io,
               "Read experts through the page cache, not O_DIRECT");
  app.add_flag("--no-prefetch", args.no_prefetch,
               "No speculative reads of the next layer's experts");
  app.add_option("--expert-eviction", args.eviction, "Which cached expert a miss replaces")
      ->check(CLI::IsMember({"lru", "lru-frequency", "next-layer"}))
      ->capture_default_str();
  app.add_option("--expert-pools", args.pools,
                 "Expert cache pools: one per expert size, one per layer, or one per layer "
                 "sized from --expert-profile's use counts")
      ->check(CLI::IsMember({"size", "layer", "profile"}))
      ->capture_default_str();
  app.add_option("--expert-profile", args.expert_profile,
                 "Expert use counts a run saved (--expert-profile-out), for --expert-pools "
                 "profile and --expert-prewarm");
  app.add_flag("--expert-prewarm", args.expert_prewarm,
               "Load --expert-profile's most used experts before the first token");
  app.add_option("--expert-profile-out", args.expert_profile_out,
                 "Record which experts the router chose and save them to this file at exit");
  app.add_flag("--explain", args.explain, "Print where the model's bytes go, and why");
  app.add_option("--stats-json", args.stats_json,
                 "Write the expert path's and the decode steps' counters to this file");
}

uint64_t parse_byte_size(const std::string& text, const char* flag) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (...) {
    used = 0;
  }
  std::string unit = text.substr(used);
  for (char& c : unit) c = char(std::tolower(static_cast<unsigned char>(c)));
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  if (unit == "k" || unit == "kb" || unit == "kib") scale = 1024.0;
  if (unit == "m" || unit == "mb" || unit == "mib") scale = 1024.0 * 1024;
  if (unit == "g" || unit == "gb" || unit == "gib") scale = 1024.0 * 1024 * 1024;
  if (unit == "t" || unit == "tb" || unit == "tib") scale = 1024.0 * 1024 * 1024 * 1024;
  if (used == 0 || scale == 0 || !(value > 0) || !std::isfinite(value * scale)) {
    throw Error(std::string(flag) + ": '" + text +
                "' is not a size (examples: 16G, 512MiB, 1073741824)");
  }
  return uint64_t(value * scale);
}

ModelOptions model_options(const EngineArgs& args) {
  ModelOptions options;
  options.n_threads = args.threads;
  options.backend = args.backend;
  options.cpu_rounding = args.cpu_rounding;
  if (!args.ram_budget.empty())
    options.ram_budget = parse_byte_size(args.ram_budget, "--ram-budget");
  options.stream_experts = args.stream_experts;
  options.expert_cache_slots = args.expert_cache;
  if (!args.vram_budget.empty())
    options.vram_budget = parse_byte_size(args.vram_budget, "--vram-budget");
  options.gpu_expert_cache = args.gpu_expert_cache;
  options.cpu_moe = args.cpu_moe;
  options.gpu_moe = args.gpu_moe;
  options.io_engine = args.io_engine;
  options.io_queue_depth = args.queue_depth;
  options.direct_io = !args.buffered_io;
  options.prefetch_experts = !args.no_prefetch;
  options.expert_eviction = args.eviction;
  options.expert_pools = args.pools;
  options.expert_profile = args.expert_profile;
  options.expert_prewarm = args.expert_prewarm;
  options.expert_profile_out = args.expert_profile_out;
  return options;
}

std::shared_ptr<Model> load_model(const std::string& path, const EngineArgs& args) {
  std::shared_ptr<Model> model = Model::load(path, model_options(args));
  if (args.explain) {
    const std::vector<std::string> lines = model->placement_explanation();
    for (const std::string& line : lines) std::fprintf(stderr, "placement: %s\n", line.c_str());
  }
  return model;
}

std::string format_expert_telemetry(const ExpertTelemetry& t) {
  const uint64_t acquired = t.hits + t.misses;
  char text[640];
  std::snprintf(
      text, sizeof text,
      "experts:     %s, %llu acquired, hit rate %.1f%%, %llu read (%.1f MiB, %.1f MiB per step)\n"
      "expert I/O:  %.3f s waited, %.2f GB/s while reading, %llu evictions\n"
      "speculation: %llu reads, %llu used, %llu wasted\n",
      t.streaming ? "streamed" : "resident", static_cast<unsigned long long>(acquired),
      acquired ? 100.0 * double(t.hits) / double(acquired) : 100.0,
      static_cast<unsigned long long>(t.experts_read), double(t.bytes_read) / 1048576.0,
      t.steps ? double(t.bytes_read) / 1048576.0 / double(t.steps) : 0.0, t.io_wait_seconds,
      t.read_seconds > 0 ? double(t.bytes_read) / t.read_seconds * 1e-9 : 0.0,
      static_cast<unsigned long long>(t.evictions),
      static_cast<unsigned long long>(t.speculative_reads),
      static_cast<unsigned long long>(t.speculative_used),
      static_cast<unsigned long long>(t.speculative_wasted));
  std::string out = text;
  if (t.device_slots > 0) {
    const uint64_t device = t.device_hits + t.device_misses;
    std::snprintf(text, sizeof text,
                  "device tier: %lld slots, hit rate %.1f%%, %.1f MiB copied to the device in "
                  "%llu copies, %llu next-layer guesses copied (%llu used)\n",
                  static_cast<long long>(t.device_slots),
                  device ? 100.0 * double(t.device_hits) / double(device) : 100.0,
                  double(t.device_bytes_copied) / 1048576.0,
                  static_cast<unsigned long long>(t.device_copies),
                  static_cast<unsigned long long>(t.device_prefetched),
                  static_cast<unsigned long long>(t.device_prefetch_used));
    out += text;
  }
  return out;
}

void write_expert_outputs(const Model& model, const EngineArgs& args) {
  if (!args.expert_profile_out.empty()) model.save_expert_profile(args.expert_profile_out);
  if (args.stats_json.empty()) return;
  const ExpertTelemetry t = model.expert_telemetry();
  const StepTelemetry d = model.step_telemetry();
  const nlohmann::json decode_steps = {{"captured", d.captured},
                                       {"replayed", d.replayed},
                                       {"rerun", d.rerun},
                                       {"plain", d.plain},
                                       {"walk_seconds", d.walk_seconds},
                                       {"graph_seconds", d.graph_seconds},
                                       {"run_seconds", d.run_seconds},
                                       {"download_seconds", d.download_seconds}};
  const nlohmann::json json = {{"decode_steps", decode_steps},
                               {"streaming", t.streaming},
                               {"io_engine", t.io_engine},
                               {"direct_io", t.direct_io},
                               {"slots", t.slots},
                               {"slot_bytes", t.slot_bytes},
                               {"steps", t.steps},
                               {"hits", t.hits},
                               {"misses", t.misses},
                               {"evictions", t.evictions},
                               {"experts_read", t.experts_read},
                               {"bytes_read", t.bytes_read},
                               {"speculative_reads", t.speculative_reads},
                               {"speculative_used", t.speculative_used},
                               {"speculative_wasted", t.speculative_wasted},
                               {"io_wait_seconds", t.io_wait_seconds},
                               {"device_slots", t.device_slots},
                               {"device_hits", t.device_hits},
                               {"device_misses", t.device_misses},
                               {"device_bytes_copied", t.device_bytes_copied},
                               {"device_copies", t.device_copies},
                               {"device_prefetched", t.device_prefetched},
                               {"device_prefetch_used", t.device_prefetch_used},
                               {"read_seconds", t.read_seconds},
                               {"layer_hits", t.layer_hits},
                               {"layer_misses", t.layer_misses},
                               {"step_hits", t.step_hits},
                               {"step_misses", t.step_misses},
                               {"step_bytes_read", t.step_bytes_read},
                               {"step_io_wait_seconds", t.step_io_wait_seconds}};
  // Written beside the target and renamed over it: never a partial file.
  const std::string temporary = args.stats_json + ".tmp";
  FILE* out = std::fopen(temporary.c_str(), "w");
  if (out == nullptr) throw Error("--stats-json: cannot write '" + args.stats_json + "'");
  const std::string text = json.dump(1) + "\n";
  const bool ok = std::fwrite(text.data(), 1, text.size(), out) == text.size();
  if (std::fclose(out) != 0 || !ok ||
      std::rename(temporary.c_str(), args.stats_json.c_str()) != 0) {
    std::remove(temporary.c_str());
    throw Error("--stats-json: cannot write '" + args.stats_json + "'");
  }
}

SessionOptions session_options(const EngineArgs& args) {
  SessionOptions options;
  options.n_ctx = args.ctx;
  options.kv_type = args.kv == "f32" ? KvType::kF32 : KvType::kF16;
  return options;
}

}  // namespace sluice::cli
