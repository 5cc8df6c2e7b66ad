// sluice_trace_replay: drives the real ExpertCache (its slots, its reads through the IoEngine,
// O_DIRECT) with a routing trace from tools/routing_trace.py instead of a router, and prints
// what the cache did per token — hit rate, bytes and read requests per token, wall time per
// token — as one JSON line. Pure I/O cost: no matmul runs, each acquired expert is waited for
// and released, layer after layer, token after token, as the forward would.
//
//   sluice_trace_replay MODEL.gguf TRACE [--budget F | --slots N] [--eviction lru|lru-frequency]
//       [--pools size|layer|profile] [--profile FILE] [--prewarm] [--save-profile FILE]
//       [--layout model|sidecar|coactivation] [--sidecar FILE] [--write-sidecar FILE]
//       [--no-merge] [--buffered-io] [--queue-depth N] [--io-engine auto|io_uring|pread]
//
// The layout is built from the GGUF's `blk.N.ffn_{gate,up,down,gate_up}_exps.weight` tensors
// alone (no architecture is bound), so an experts-only GGUF of any shape serves. Trace layer l is
// model layer l; the model's later layers are left out. `--layout coactivation` replays on the
// id-ordered sidecar with each id e renamed to its position in coactivation_order(profile):
// exactly the offsets an ordered sidecar (`sluice repack --order coactivation`) would be read at,
// without a second copy of the experts on disk.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "experts/expert_cache.h"
#include "experts/expert_profile.h"
#include "experts/expert_sidecar.h"
#include "format/model_file_open.h"
#include "io/file.h"

namespace sluice {
namespace {

using experts::ExpertLayout;
using experts::ExpertProfile;

struct Args {
  std::string model, trace;
  double budget = 0.25;  // of the trace's layers' expert slots
  int64_t slots = 0;
  std::string eviction = "lru-frequency", pools = "size", layout = "sidecar";
  std::string profile, save_profile, sidecar, write_sidecar, io_engine = "auto";
  bool prewarm = false, merge = true, direct = true;
  int queue_depth = 32;
};

struct Trace {
  int64_t n_layer = 0, n_expert = 0, n_used = 0;
  std::vector<int32_t> ids;  // [tokens, n_layer, n_used]
  int64_t tokens() const { return int64_t(ids.size()) / (n_layer * n_used); }
};

Trace read_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(path, ": cannot open the trace");
  std::string line;
  std::getline(in, line);
  const nlohmann::json header = nlohmann::json::parse(line, nullptr, false);
  if (header.is_discarded() || header.value("format", "") != "sluice routing trace")
    fail(path, ": not a routing trace (tools/routing_trace.py writes them)");
  Trace trace;
  trace.n_layer = header.value("n_layer", int64_t(0));
  trace.n_expert = header.value("n_expert", int64_t(0));
  trace.n_used = header.value("n_used", int64_t(0));
  if (trace.n_layer <= 0 || trace.n_used <= 0 || trace.n_expert < trace.n_used)
    fail(path, ": bad trace header");
  int64_t id = 0;
  while (in >> id) {
    if (id < 0 || id >= trace.n_expert) fail(path, ": expert id ", id, " out of range");
    trace.ids.push_back(int32_t(id));
  }
  if (trace.ids.empty() || trace.ids.size() % size_t(trace.n_layer * trace.n_used) != 0)
    fail(path, ": truncated trace");
  return trace;
}

// The routed experts of a GGUF from its tensor names alone.
ExpertLayout layout_from_gguf(const std::string& path, int64_t n_expert_used) {
  const ModelFile file = read_model_file(path);
  ExpertLayout layout;
  layout.files.push_back(std::make_shared<File>(File::open(path)));
  layout.n_expert_used = n_expert_used;
  const std::regex name(R"(blk\.(\d+)\.ffn_(gate|up|down|gate_up)_exps\.weight)");
  const std::map<std::string, experts::ExpertPart> parts = {
      {"gate", experts::ExpertPart::kGate},
      {"up", experts::ExpertPart::kUp},
      {"down", experts::ExpertPart::kDown},
      {"gate_up", experts::ExpertPart::kGateUp}};
  for (const TensorInfo& t : file.tensors()) {
    std::smatch m;
    if (!std::regex_match(t.name, m, name) || t.n_dims != 3) continue;
    const size_t il = std::stoul(m[1]);
    if (il >= layout.layers.size()) layout.layers.resize(il + 1);
    experts::ExpertLayerLayout& layer = layout.layers[il];
    layer.n_expert = int64_t(t.ne[2]);
    experts::ExpertTensor& part = layer.parts[size_t(parts.at(m[2]))];
    part.name = t.name;
    part.type = t.type;
    part.n_cols = int64_t(t.ne[0]);
    part.n_rows = int64_t(t.ne[1]);
    part.offset = t.offset;
    part.expert_bytes = part.expert_stride = t.n_bytes / t.ne[2];
  }
  if (layout.empty()) fail(path, ": has no blk.N.ffn_*_exps.weight tensors");
  return layout;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int replay(const Args& args) {
  if (!args.write_sidecar.empty()) {  // the trace is not read: any path serves
    experts::write_expert_sidecar(layout_from_gguf(args.model, 1), args.model, args.write_sidecar);
    std::printf("{\"wrote\": \"%s\"}\n", args.write_sidecar.c_str());
    return 0;
  }
  const Trace trace = read_trace(args.trace);
  ExpertLayout layout = layout_from_gguf(args.model, trace.n_used);
  if (args.layout != "model") {
    const std::string sidecar =
        args.sidecar.empty() ? experts::default_sidecar_path(args.model) : args.sidecar;
    experts::use_expert_sidecar(layout, args.model, sidecar);
  }
  if (int64_t(layout.layers.size()) < trace.n_layer)
    fail(args.trace, ": ", trace.n_layer, " layers, the model has ", layout.layers.size());
  layout.layers.resize(size_t(trace.n_layer));
  for (int64_t il = 0; il < trace.n_layer; ++il) {
    if (layout.layers[size_t(il)].n_expert != trace.n_expert)
      fail(args.trace, ": ", trace.n_expert, " experts, model layer ", il, " has ",
           layout.layers[size_t(il)].n_expert);
  }
  ExpertProfile profile;
  if (!args.profile.empty()) {
    profile = ExpertProfile::load(args.profile);
    profile.check_matches(layout, args.profile);
  }
  const bool need_profile =
      args.prewarm || args.pools == "profile" || args.layout == "coactivation";
  if (need_profile && args.profile.empty())
    fail("--prewarm, --pools profile and --layout coactivation need --profile FILE");

  // The id each trace id is read as: its position in the co-activation order, or itself.
  std::vector<std::vector<int32_t>> rename(size_t(trace.n_layer));
  for (int64_t il = 0; il < trace.n_layer; ++il) {
    std::vector<int32_t>& r = rename[size_t(il)];
    r.resize(size_t(trace.n_expert));
    for (int32_t e = 0; e < int32_t(trace.n_expert); ++e) r[size_t(e)] = e;
    if (args.layout != "coactivation") continue;
    const std::vector<int32_t> order = experts::coactivation_order(profile.layers[size_t(il)]);
    for (size_t q = 0; q < order.size(); ++q) r[size_t(order[q])] = int32_t(q);
  }

  experts::ExpertCacheOptions options;
  const int64_t all = trace.n_layer * trace.n_expert;
  options.n_slots = args.slots > 0 ? args.slots : int64_t(args.budget * double(all) + 0.5);
  options.n_slots = std::max(options.n_slots, trace.n_used * trace.n_layer);
  options.io_engine = parse_io_engine_kind(args.io_engine.c_str());
  options.queue_depth = args.queue_depth;
  options.direct_io = args.direct;
  options.prefetch = false;  // no router, no guesses
  options.merge_reads = args.merge;
  options.record_profile = !args.save_profile.empty();
  if (args.eviction == "lru") {
    options.policy = experts::EvictionPolicy::kLru;
  } else if (args.eviction == "lru-frequency") {
    options.policy = experts::EvictionPolicy::kLruFrequency;
  } else if (args.eviction == "next-layer") {
    options.policy = experts::EvictionPolicy::kNextLayer;
  } else {
    fail("--eviction: '", args.eviction, "' is not one of lru, lru-frequency, next-layer");
  }
  if (args.pools == "layer" || args.pools == "profile")
    options.per_layer_pools = true;
  else if (args.pools != "size")
    fail("--pools: '", args.pools, "' is not size, layer or profile");
  if (args.pools == "profile") {
    options.layer_slots =
        experts::layer_budgets_from_profile(profile, options.n_slots, trace.n_used);
  }
  experts::ExpertCache cache(layout, options);
  const auto now = [] { return std::chrono::steady_clock::now(); };
  const auto t0 = now();
  const int64_t prewarmed = args.prewarm ? cache.prewarm(profile) : 0;
  const double prewarm_s = std::chrono::duration<double>(now() - t0).count();

  std::vector<double> token_ms;
  std::vector<int32_t> ids(size_t(trace.n_used));
  const auto start = now();
  for (int64_t t = 0; t < trace.tokens(); ++t) {
    const auto token_start = now();
    for (int64_t il = 0; il < trace.n_layer; ++il) {
      const int32_t* chosen = &trace.ids[size_t((t * trace.n_layer + il) * trace.n_used)];
      for (int64_t k = 0; k < trace.n_used; ++k)
        ids[size_t(k)] = rename[size_t(il)][size_t(chosen[k])];
      cache.acquire(il, ids);
      for (const int32_t id : ids) cache.wait(il, id);
      cache.release(il);
    }
    cache.end_step();
    token_ms.push_back(std::chrono::duration<double, std::milli>(now() - token_start).count());
  }
  const double total_s = std::chrono::duration<double>(now() - start).count();
  if (const ExpertProfile* recorded = cache.profile()) recorded->save(args.save_profile);

  const experts::ExpertCounters& c = cache.stats().total;
  const double n = double(trace.tokens());
  const nlohmann::json out = {
      {"tokens", trace.tokens()},
      {"slots", cache.stats().slots},
      {"slot_bytes", cache.stats().slot_bytes},
      {"budget_fraction", double(cache.stats().slots) / double(all)},
      {"eviction", args.eviction},
      {"pools", args.pools},
      {"layout", args.layout},
      {"prewarm", args.prewarm},
      {"merge", args.merge},
      {"io_engine", cache.io_engine_name()},
      {"direct_io", cache.direct_io()},
      {"hit_rate", double(c.hits) / double(std::max<uint64_t>(c.hits + c.misses, 1))},
      {"bytes_per_token", double(c.bytes_read) / n},
      {"reads_per_token", double(c.reads) / n},
      {"experts_read_per_token", double(c.experts_read) / n},
      {"ms_per_token_median", median(token_ms)},
      {"ms_per_token_mean", total_s * 1e3 / n},
      {"io_wait_s", double(c.io_wait_ns) * 1e-9},
      {"prewarm_experts", prewarmed},
      {"prewarm_bytes", cache.stats().prewarm.bytes_read},
      {"prewarm_s", prewarm_s}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

Args parse(int argc, char** argv) {
  Args a;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail(arg, " needs a value");
      return argv[++i];
    };
    if (arg == "--budget")
      a.budget = std::stod(value());
    else if (arg == "--slots")
      a.slots = std::stoll(value());
    else if (arg == "--eviction")
      a.eviction = value();
    else if (arg == "--pools")
      a.pools = value();
    else if (arg == "--layout")
      a.layout = value();
    else if (arg == "--profile")
      a.profile = value();
    else if (arg == "--save-profile")
      a.save_profile = value();
    else if (arg == "--sidecar")
      a.sidecar = value();
    else if (arg == "--write-sidecar")
      a.write_sidecar = value();
    else if (arg == "--io-engine")
      a.io_engine = value();
    else if (arg == "--queue-depth")
      a.queue_depth = std::stoi(value());
    else if (arg == "--prewarm")
      a.prewarm = true;
    else if (arg == "--no-merge")
      a.merge = false;
    else if (arg == "--buffered-io")
      a.direct = false;
    else if (arg.rfind("--", 0) == 0)
      fail("unknown option ", arg);
    else
      positional.push_back(arg);
  }
  if (positional.size() != 2) fail("usage: sluice_trace_replay MODEL.gguf TRACE [options]");
  if (a.layout != "model" && a.layout != "sidecar" && a.layout != "coactivation")
    fail("--layout: '", a.layout, "' is not model, sidecar or coactivation");
  if (!(a.budget > 0 && a.budget <= 1)) fail("--budget must be in (0, 1]");
  a.model = positional[0];
  a.trace = positional[1];
  return a;
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) {
  try {
    return sluice::replay(sluice::parse(argc, argv));
  } catch (const std::exception& e) {  // sluice::Error, or std::stod on a non-number
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
