// Model::load and LoadedModel: opening, checking and summarising a model.
#include "runtime/loaded_model.h"

#include <sched.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "backend/checked/checked_memory_backend.h"
#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "experts/device_expert_slots.h"
#include "experts/device_planner.h"
#include "experts/expert_cache.h"
#include "experts/expert_sidecar.h"
#include "experts/planner.h"
#include "experts/resident_experts.h"
#include "format/model_file_open.h"
#include "model/registry.h"
#include "runtime/calibration.h"

#if SLUICE_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.h"
#endif

namespace sluice {

int default_thread_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? int(n) : 1;
}

namespace {

// The type of the routed experts' first part (what the CPU's expert matvec rate is measured on).
[[maybe_unused]] QType expert_type(const experts::ExpertLayout& layout) {
  for (const experts::ExpertLayerLayout& l : layout.layers) {
    for (const experts::ExpertTensor& part : l.parts) {
      if (part.present()) return part.type;
    }
  }
  return QType::F32;
}

}  // namespace

LoadedModel::LoadedModel(const std::string& path, const ModelOptions& options)
    : source_(path),
      file_(read_model_file(source_.path())),
      language_model_(model::load_language_model(file_)),
      tokenizer_(TextTokenizer::from_model_file(path)) {
  if (options.backend != "auto" && options.backend != "cpu" && options.backend != "cuda") {
    fail("backend '", options.backend, "' is not one of: auto, cpu, cuda");
  }
  if (options.n_threads < 0 || options.n_threads > 1024) {
    fail("threads must be between 1 and 1024 (or 0 for automatic), got ", options.n_threads);
  }
  const model::ModelSummary& summary = language_model_->summary();
  if (int64_t(tokenizer_.n_vocab()) > summary.n_vocab) {
    fail(path, ": the tokenizer has ", tokenizer_.n_vocab(), " tokens but the model only ",
         summary.n_vocab, " logits");
  }
  info_.path = path;
  info_.architecture = summary.architecture;
  const MetaValue* name = file_.find("general.name");
  info_.name = name != nullptr && name->as_string() != nullptr
                   ? *name->as_string()
                   : std::filesystem::path(path).filename().string();
  info_.n_ctx_train = summary.n_ctx_train;
  info_.n_vocab = summary.n_vocab;
  info_.n_layer = summary.n_layer;
  info_.n_embd = summary.n_embd;
  for (const TensorInfo& tensor : file_.tensors()) info_.weight_bytes += tensor.n_bytes;
  place_experts(options);
  pool_ = std::make_unique<ThreadPool>(options.n_threads > 0 ? options.n_threads
                                                             : default_thread_count());
  choose_backend(options);
}

// cuda when asked for, or for auto when a device exists and the architecture's forward runs on
// it; the reason goes first in the placement explanation.
void LoadedModel::choose_backend(const ModelOptions& options) {
  std::string why_not_cuda;
#if SLUICE_HAVE_CUDA
  if (cuda::device_count() == 0) why_not_cuda = "no CUDA device found";
#else
  why_not_cuda = "this build has no CUDA backend (nvcc was not found when it was configured)";
#endif
  if (why_not_cuda.empty() && !language_model_->runs_on_device()) {
    why_not_cuda = "the " + info_.architecture + " forward runs on the CPU only so far";
  }
  if (options.backend == "cuda" && !why_not_cuda.empty()) fail("backend cuda: ", why_not_cuda);
  const bool cuda = options.backend != "cpu" && why_not_cuda.empty();
  std::string reason;
#if SLUICE_HAVE_CUDA
  if (cuda) {
    backend_ = std::make_unique<cuda::CudaBackend>(0, options.cpu_rounding);
    info_.backend = "cuda";
    info_.device = cuda::describe_device(0);
    reason = "backend: cuda on " + info_.device +
             " (weights, activations and KV cache in device memory" +
             (options.cpu_rounding ? "; rounding as the CPU backend's" : "") + ")";
    place_experts_on_device(options);
  }
#endif
  if (!cuda) {
    backend_ = std::make_unique<cpu::CpuBackend>(pool_.get());
    info_.backend = "cpu";
    reason = "backend: cpu, " + std::to_string(pool_->size()) + " threads" +
             (options.backend == "auto" ? " (" + why_not_cuda + ")" : "");
    if (checked::check_backend_memory_requested()) {
      // The device's memory rules on the CPU (backend/checked): only for forwards meant to run
      // on a device, so refused with --backend cuda's words for the others.
      if (!language_model_->runs_on_device()) {
        fail("backend cpu with SLUICE_CHECK_BACKEND_MEMORY: the ", info_.architecture,
             " forward runs on the CPU only so far");
      }
      backend_ = std::make_unique<checked::CheckedMemoryBackend>(std::move(backend_));
      reason += ", memory checked as a device's (SLUICE_CHECK_BACKEND_MEMORY)";
    }
  }
  placement_.insert(placement_.begin(), reason);
  if (options.cpu_moe && !cuda && !expert_layout_.empty()) {
    // On the CPU backend a CPU backend of its own for the experts gives the same numbers: the
    // hybrid path's transfers are checked where there is no GPU.
    expert_backend_ = std::make_unique<cpu::CpuBackend>(pool_.get());
    placement_.push_back(
        "routed experts: computed on the CPU from the host tier (--cpu-moe), "
        "by a CPU backend of their own");
  }
}

void LoadedModel::forward(const model::ForwardRequest& request) {
  using Clock = std::chrono::steady_clock;
  const int64_t n = int64_t(request.tokens.size());
  // A decode step after a decode step (the one before met every buffer size and weight).
  const bool decode =
      request.observer == nullptr && n == 1 && last_step_tokens_ == 1 &&
      !language_model_->decode_reads_host(*backend_, experts_.get(), expert_backend_.get());
  last_step_tokens_ = n;
  model::ForwardRequest with_experts = request;
  with_experts.expert_backend = expert_backend_.get();
  if (hybrid_device_prefill_) {
    // The hybrid placement with device slots: a long chunk's experts go through them and are
    // multiplied on the device, decode and short chunks take the host tier below to the CPU.
    auto& slots = static_cast<experts::DeviceExpertSlots&>(*experts_);
    if (n >= experts::kHybridDevicePrefillTokens) {
      with_experts.expert_backend = nullptr;
    } else {
      with_experts.experts = &slots.host();
    }
  }
  const Clock::time_point start = Clock::now();
  if (decode && recording_.want() && backend_->begin_recorded_step()) {
    try {
      language_model_->forward(*backend_, with_experts);
      backend_->end_recorded_step();
      recording_.observe(true, std::chrono::duration<double>(Clock::now() - start).count());
      return;
    } catch (const Error&) {
      // Something the recording cannot hold (a buffer growing, a weight met for the first
      // time) or a step that differs from the one being replayed (another attention span
      // bucket, another cache): nothing ran on the device — a replay only checks the ops and
      // stages their data — so the step runs again as it is, untimed; the backend has dropped
      // the recording, and the next recorded step captures anew.
      backend_->abort_recorded_step();
      language_model_->forward(*backend_, with_experts);
      ++reruns_;
      return;
    }
  }
  language_model_->forward(*backend_, with_experts);
  if (decode) {
    ++plain_decode_steps_;
    recording_.observe(false, std::chrono::duration<double>(Clock::now() - start).count());
  }
}

// One session of min(4096, n_ctx_train) tokens in F16.
uint64_t LoadedModel::kv_reserve_bytes() const {
  const int64_t n_ctx = std::min<int64_t>(4096, info_.n_ctx_train);
  uint64_t bytes = 0;
  for (const model::KvLayerSpec& spec : language_model_->kv_layout()) {
    bytes += uint64_t(n_ctx * spec.n_head_kv * (spec.head_dim_k + spec.head_dim_v) * 2);
  }
  return bytes;
}

// Activations of 512-token chunks and their logits.
uint64_t LoadedModel::scratch_reserve_bytes() const {
  return uint64_t(512 * info_.n_embd * 4 * 16 + info_.n_vocab * 4 * 512);
}

// The device tier of the routed experts: all of them in device memory when they fit the budget
// (the backend copies each on first use), else slots in front of the host tier or the CPU
// computing them, as experts/device_planner decides from the calibrated rates.
void LoadedModel::place_experts_on_device(const ModelOptions& options) {
#if SLUICE_HAVE_CUDA
  if (expert_layout_.empty()) return;
  constexpr uint64_t kHeadroom = uint64_t(2) << 30;
  uint64_t free = 0, total = 0;
  if (!cuda::device_memory(0, &free, &total)) fail("backend cuda: cannot read the device's memory");
  const uint64_t expert_bytes = expert_layout_.total_bytes();
  experts::DevicePlanRequest request;
  request.budget =
      options.vram_budget > 0 ? options.vram_budget : (free > kHeadroom ? free - kHeadroom : 0);
  request.fixed_bytes =
      (info_.weight_bytes > expert_bytes ? info_.weight_bytes - expert_bytes : 0) +
      kv_reserve_bytes() + scratch_reserve_bytes();
  request.slot_bytes = experts::DeviceExpertSlots::slot_bytes(expert_layout_);
  request.host_streams = dynamic_cast<const experts::ExpertCache*>(experts_.get()) != nullptr;
  request.forced_slots = options.gpu_expert_cache;
  request.compute = options.cpu_moe   ? experts::ExpertCompute::kCpu
                    : options.gpu_moe ? experts::ExpertCompute::kDevice
                                      : experts::ExpertCompute::kAuto;
  experts::DevicePlan plan = experts::plan_device_experts(expert_layout_, request);
  if (plan.mode != experts::DevicePlan::Mode::kAllOnDevice &&
      request.compute == experts::ExpertCompute::kAuto) {
    // Between the device tier and the CPU: by the machine's measured rates.
    const QType type = expert_type(expert_layout_);
    const CalibratedRates rates = calibrated_rates(
        info_.device, type, *pool_, [] { return cuda::measure_host_to_device_bytes_per_s(); },
        [&] { return measure_backend_matvec_bytes_per_s(*backend_, type); });
    request.h2d_bytes_per_s = rates.h2d_bytes_per_s;
    request.cpu_bytes_per_s = rates.cpu_bytes_per_s;
    request.device_bytes_per_s = rates.device_bytes_per_s;
    // What the device reads per token besides the routed experts: every other weight but the
    // token embedding table (one row a token) unless it doubles as the output head.
    const TensorInfo* embedding = file_.find_tensor("token_embd.weight");
    const uint64_t skipped = embedding != nullptr && file_.find_tensor("output.weight") != nullptr
                                 ? embedding->n_bytes
                                 : 0;
    const uint64_t rest = info_.weight_bytes > expert_bytes ? info_.weight_bytes - expert_bytes : 0;
    request.device_rest_bytes = rest > skipped ? rest - skipped : 0;
    plan = experts::plan_device_experts(expert_layout_, request);
    plan.reasons.push_back(std::string("rates: ") +
                           (rates.measured_now ? "measured now, kept in " : "from ") + rates.file);
  }
  placement_.insert(placement_.end(), plan.reasons.begin(), plan.reasons.end());
  if (plan.n_slots > 0) {
    auto slots = std::make_unique<experts::DeviceExpertSlots>(std::move(experts_), expert_layout_,
                                                              *backend_, plan.n_slots);
    if (slots->pinned_bytes() > 0) {
      char line[160];
      std::snprintf(line, sizeof line,
                    "device tier fed from page-locked host memory (%.2f GiB of the mapped file)",
                    double(slots->pinned_bytes()) / double(uint64_t(1) << 30));
      placement_.push_back(line);
    }
    experts_ = std::move(slots);
  }
  if (plan.mode == experts::DevicePlan::Mode::kHybrid) {
    expert_backend_ = std::make_unique<cpu::CpuBackend>(pool_.get());
    hybrid_device_prefill_ = plan.n_slots > 0;
  }
#else
  (void)options;
#endif
}

const experts::ExpertSource* LoadedModel::host_experts() const {
  if (const auto* device = dynamic_cast<const experts::DeviceExpertSlots*>(experts_.get())) {
    return &device->host();
  }
  return experts_.get();
}

// Resident or streamed routed experts, as the planner decides under the RAM budget. The KV
// reserve assumes one session of min(4096, n_ctx_train) tokens in F16.
void LoadedModel::place_experts(const ModelOptions& options) {
  expert_layout_ = language_model_->expert_layout();
  const experts::ExpertLayout& layout = expert_layout_;
  if (layout.empty()) {
    placement_.push_back("dense model, every weight resident (mapped)");
    return;
  }
  const std::string sidecar = experts::default_sidecar_path(info_.path);
  const bool repacked = std::filesystem::exists(sidecar);
  if (repacked) experts::use_expert_sidecar(expert_layout_, info_.path, sidecar);
  experts::PlacementRequest request;
  request.weight_bytes = info_.weight_bytes;
  request.kv_bytes = kv_reserve_bytes();
  request.scratch_bytes = scratch_reserve_bytes();
  request.ram_budget = options.ram_budget;
  request.force_stream = options.stream_experts;
  request.n_slots = options.expert_cache_slots;
  if (options.expert_pools != "size" && options.expert_pools != "layer" &&
      options.expert_pools != "profile") {
    fail("expert pools '", options.expert_pools, "' is not one of: size, layer, profile");
  }
  request.per_layer_pools = options.expert_pools != "size";
  experts::ExpertProfile profile;  // --expert-profile: use counts a run saved
  if (!options.expert_profile.empty()) {
    profile = experts::ExpertProfile::load(options.expert_profile);
    profile.check_matches(layout, options.expert_profile);
  } else if (options.expert_pools == "profile" || options.expert_prewarm) {
    fail("expert pools 'profile' and pre-warm need an expert profile (--expert-profile FILE)");
  }
  const experts::Placement plan = experts::plan_placement(layout, request);
  placement_ = plan.reasons;
  placement_.push_back(repacked ? "expert layout: expert-major, from " + sidecar
                                : "expert layout: the model file's (one read per part; `sluice "
                                  "repack` makes one read per expert)");
  if (!plan.stream) {
    if (!options.expert_profile_out.empty())
      fail("recording an expert profile needs streamed experts (add --stream-experts)");
    experts_ = std::make_unique<experts::ResidentExperts>(layout);
    return;
  }
  experts::ExpertCacheOptions cache;
  cache.n_slots = plan.n_slots;
  cache.io_engine = parse_io_engine_kind(options.io_engine.c_str());
  cache.queue_depth = options.io_queue_depth;
  cache.direct_io = options.direct_io;
  cache.prefetch = options.prefetch_experts;
  cache.per_layer_pools = request.per_layer_pools;
  cache.record_profile = !options.expert_profile_out.empty();
  if (options.expert_pools == "profile") {
    cache.layer_slots =
        experts::layer_budgets_from_profile(profile, plan.n_slots, layout.n_expert_used);
  }
  if (options.expert_eviction == "lru") {
    cache.policy = experts::EvictionPolicy::kLru;
  } else if (options.expert_eviction == "lru-frequency") {
    cache.policy = experts::EvictionPolicy::kLruFrequency;
  } else if (options.expert_eviction == "next-layer") {
    cache.policy = experts::EvictionPolicy::kNextLayer;
  } else {
    fail("expert eviction '", options.expert_eviction,
         "' is not one of: lru, lru-frequency, next-layer");
  }
  auto streamed = std::make_unique<experts::ExpertCache>(layout, cache);
  placement_.push_back(std::string("reads: ") + streamed->io_engine_name() + ", queue depth " +
                       std::to_string(cache.queue_depth) +
                       (streamed->direct_io() ? ", O_DIRECT" : ", buffered") +
                       (cache.prefetch ? ", prefetch on" : ", prefetch off") + ", eviction " +
                       options.expert_eviction + ", pools per " + options.expert_pools);
  if (options.expert_prewarm) {
    const int64_t loaded = streamed->prewarm(profile);
    placement_.push_back("pre-warmed " + std::to_string(loaded) + " experts (" +
                         std::to_string(streamed->stats().prewarm.bytes_read >> 20) +
                         " MiB) from " + options.expert_profile);
  }
  experts_ = std::move(streamed);
}

StepTelemetry LoadedModel::step_telemetry() const {
  std::lock_guard lock(forward_mutex_);
  const RecordedStepTimes times = backend_->recorded_step_times();
  return {.captured = times.captured,
          .replayed = times.replayed,
          .rerun = reruns_,
          .plain = plain_decode_steps_,
          .walk_seconds = times.walk_seconds,
          .graph_seconds = times.graph_seconds,
          .run_seconds = times.run_seconds,
          .download_seconds = times.download_seconds};
}

ExpertTelemetry LoadedModel::expert_telemetry() const {
  ExpertTelemetry t;
  if (!experts_) return t;
  // The counters change inside forwards (on another thread, in the server).
  std::lock_guard lock(forward_mutex_);
  const experts::ExpertStats& stats = experts_->stats();
  experts::ExpertCounters c = stats.total;
  c.add(stats.last_step);
  if (const auto* device = dynamic_cast<const experts::DeviceExpertSlots*>(experts_.get())) {
    t.device_slots = device->n_slots();
    t.device_hits = device->device_counters().hits;
    t.device_misses = device->device_counters().misses;
    t.device_bytes_copied = device->device_counters().bytes_copied;
    t.device_copies = device->device_counters().copies;
    t.device_prefetched = device->device_counters().prefetched;
    t.device_prefetch_used = device->device_counters().prefetch_used;
  }
  if (const auto* cache = dynamic_cast<const experts::ExpertCache*>(host_experts())) {
    t.streaming = true;
    t.io_engine = cache->io_engine_name();
    t.direct_io = cache->direct_io();
  }
  t.slots = int64_t(stats.slots);
  t.slot_bytes = stats.slot_bytes;
  t.steps = stats.steps;
  t.hits = c.hits;
  t.misses = c.misses;
  t.evictions = c.evictions;
  t.experts_read = c.experts_read;
  t.bytes_read = c.bytes_read;
  t.speculative_reads = c.speculative_reads;
  t.speculative_used = c.speculative_used;
  t.speculative_wasted = c.speculative_wasted;
  t.io_wait_seconds = double(c.io_wait_ns) * 1e-9;
  t.read_seconds = double(c.read_ns) * 1e-9;
  for (const experts::ExpertCounters& layer : stats.per_layer) {
    t.layer_hits.push_back(layer.hits);
    t.layer_misses.push_back(layer.misses);
  }
  for (const experts::ExpertCounters& step : stats.history) {
    t.step_hits.push_back(step.hits);
    t.step_misses.push_back(step.misses);
    t.step_bytes_read.push_back(step.bytes_read);
    t.step_io_wait_seconds.push_back(double(step.io_wait_ns) * 1e-9);
  }
  return t;
}

void LoadedModel::save_expert_profile(const std::string& path) const {
  std::lock_guard lock(forward_mutex_);
  const auto* cache = dynamic_cast<const experts::ExpertCache*>(host_experts());
  if (cache == nullptr || cache->profile() == nullptr)
    fail(
        "no expert profile was recorded (it needs a MoE model, streamed experts and "
        "--expert-profile-out)");
  cache->profile()->save(path);
}

void Model::save_expert_profile(const std::string&) const {
  fail("this model records no expert profile");
}

std::shared_ptr<Model> Model::load(const std::string& path, const ModelOptions& options) {
  return std::make_shared<LoadedModel>(path, options);
}

}  // namespace sluice
