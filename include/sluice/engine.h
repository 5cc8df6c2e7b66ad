// The engine through the public API: load a model (GGUF file or Hugging Face safetensors
// snapshot), open sessions on it, evaluate token ids, generate with a sampler. The CLI and the
// server use this alone; architectures, tensors, kernels and the KV cache stay behind it.
// A Session is used by one thread at a time; a Model may be shared by many sessions.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/tokenizer.h"

namespace sluice {

struct ModelOptions {
  int n_threads = 0;  // 0: one per physical core the process may use
  // "auto" (CUDA when a device is present and the architecture's forward runs there, else the
  // CPU), "cpu" or "cuda".
  std::string backend = "auto";
  // CUDA: round every product and attention as the CPU backend does (--cpu-rounding), so that
  // results, greedy tokens included, agree with backend "cpu"; prefill is several times slower.
  bool cpu_rounding = false;
  // CUDA: device memory the model may use (0: free memory minus 2 GiB), and device slots for
  // routed experts (0: all experts on the device when they fit the budget, else as many slots
  // as it holds).
  uint64_t vram_budget = 0;
  int64_t gpu_expert_cache = 0;
  // Hybrid placement (llama.cpp's --cpu-moe / `-ot exps=CPU`): routed experts computed by the CPU
  // from the host tier while everything else runs on the backend above.
  bool cpu_moe = false;
  // Keep the routed experts on the GPU's tier even when the measured rates favour the CPU
  // (--gpu-moe). Neither flag: the device planner chooses and says why.
  bool gpu_moe = false;

  // Where the routed experts of a Mixture-of-Experts model live (dense models ignore these).
  uint64_t ram_budget = 0;         // bytes; 0: available memory minus max(10%, 2 GiB)
  bool stream_experts = false;     // stream from disk even when everything fits
  int64_t expert_cache_slots = 0;  // 0: as many as the budget holds
  std::string io_engine = "auto";  // "auto", "io_uring" or "pread"
  int io_queue_depth = 32;         // reads in flight at once
  bool direct_io = true;           // O_DIRECT (buffered where the file system refuses it)
  bool prefetch_experts = true;    // speculative reads of the next layer's likely experts
  std::string expert_eviction = "lru-frequency";  // or "lru", "next-layer"
  std::string expert_pools = "size";  // one cache pool per expert size, "layer", or "profile"
                                      // (per layer, sized from expert_profile's use counts)
  std::string expert_profile{};       // a saved expert profile to read ("" none)
  bool expert_prewarm = false;        // load expert_profile's most used experts before token 1
  std::string expert_profile_out{};   // record this run's expert profile, for save_expert_profile
};

// What the expert path did since the model was loaded (MoE models only).
struct ExpertTelemetry {
  bool streaming = false;
  std::string io_engine;  // "io_uring" / "pread" when streaming
  bool direct_io = false;
  int64_t slots = 0;
  uint64_t slot_bytes = 0;
  uint64_t steps = 0;  // forward calls (decode tokens and prefill chunks)
  uint64_t hits = 0, misses = 0, evictions = 0;
  uint64_t experts_read = 0, bytes_read = 0;
  uint64_t speculative_reads = 0, speculative_used = 0, speculative_wasted = 0;
  double io_wait_seconds = 0;  // the forward waiting on reads
  double read_seconds = 0;     // time with reads in flight
  // The device tier (CUDA): slots of device memory in front of the host tier above.
  int64_t device_slots = 0;  // 0: no device tier (CPU, or every expert resident on the device)
  uint64_t device_hits = 0, device_misses = 0, device_bytes_copied = 0;
  uint64_t device_copies = 0;  // host → device transfers: an expert's parts may go as one
  // Next-layer guesses copied to the device, and those acquired before their slot was reused
  // (the others' bytes crossed the bus for nothing).
  uint64_t device_prefetched = 0, device_prefetch_used = 0;
  std::vector<uint64_t> layer_hits, layer_misses;  // [n_layer]
  // Each forward call's figures (decode tokens and prefill chunks), the first 16384 of them.
  std::vector<uint64_t> step_hits, step_misses, step_bytes_read;
  std::vector<double> step_io_wait_seconds;
};

// How the decode steps ran since the model was loaded: recorded (a GPU's CUDA graphs: captured,
// or replayed after checking every op against the recording), run again unrecorded after a
// recording failed, or run plain; and where a recorded step's time went on the host.
struct StepTelemetry {
  uint64_t captured = 0, replayed = 0, rerun = 0, plain = 0;
  double walk_seconds = 0;      // the host queueing (checking) a recorded step's ops
  double graph_seconds = 0;     // instantiating or updating captured graphs
  double run_seconds = 0;       // launching a recorded step and waiting for it
  double download_seconds = 0;  // copying its downloads (logits) to their destinations
};

struct ModelInfo {
  std::string path;
  std::string architecture;  // general.architecture, e.g. "llama"
  std::string name;          // general.name, or the file name
  int64_t n_ctx_train = 0;   // the context length the model was trained with
  int64_t n_vocab = 0;
  int64_t n_layer = 0;
  int64_t n_embd = 0;
  uint64_t weight_bytes = 0;  // bytes of all tensors as stored
  std::string backend;        // the backend the forwards run on: "cpu" or "cuda"
  std::string device;         // what it runs on, e.g. "NVIDIA H200 (sm_90)"; "" for the CPU
};

class Model {
 public:
  // Loads and checks every tensor the architecture expects; throws sluice::Error naming the
  // file, tensor or key when anything is missing, misshapen or of an unknown type.
  static std::shared_ptr<Model> load(const std::string& path, const ModelOptions& options = {});
  virtual ~Model() = default;

  virtual const ModelInfo& info() const = 0;
  virtual const TextTokenizer& tokenizer() const = 0;
  // The model's Jinja chat template ("" when it has none) and BOS/EOS texts for rendering.
  virtual const std::string& chat_template() const = 0;
  // The backend and the placement decision, one reason per line (`--explain`).
  virtual std::vector<std::string> placement_explanation() const = 0;
  // Counters of the expert path; streaming false and zeros for dense models.
  virtual ExpertTelemetry expert_telemetry() const = 0;
  virtual StepTelemetry step_telemetry() const = 0;
  // Writes what the router chose so far (per layer, per expert use counts and co-activation) to
  // `path`, through a temporary name; needs ModelOptions::expert_profile_out and streamed
  // experts. Throws sluice::Error otherwise or when the file cannot be written.
  virtual void save_expert_profile(const std::string& path) const;
};

enum class KvType { kF16, kF32 };

struct SessionOptions {
  int64_t n_ctx = 4096;  // capped at the model's n_ctx_train; 0: n_ctx_train
  KvType kv_type = KvType::kF16;
  int64_t n_batch = 512;  // prefill chunk: tokens per forward call (llama.cpp's n_ubatch)
};

struct SamplingParams {
  float temperature = 0.0f;     // <= 0: greedy (argmax; deterministic)
  int32_t top_k = 0;            // <= 0: off
  float top_p = 1.0f;           // >= 1: off
  float min_p = 0.0f;           // <= 0: off
  float typical_p = 1.0f;       // >= 1: off
  float repeat_penalty = 1.0f;  // 1: off (divides positive logits, multiplies negative)
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t penalty_last_n = 64;          // window of recent tokens the penalties look at
  std::map<int32_t, float> logit_bias;  // added to the logit of each id
  uint64_t seed = 0xC0FFEE;             // same seed, same params, same logits: same tokens
};

enum class StopReason {
  kMaxTokens,
  kEndOfGeneration,
  kStopToken,
  kStopString,
  kCancelled,
  kContextFull
};
const char* stop_reason_name(StopReason reason);  // "length", "eog", "stop_token", "stop", …

struct GenerationRequest {
  std::vector<int32_t> prompt;  // the whole conversation so far; a shared prefix is reused
  SamplingParams sampling;
  int64_t max_tokens = 256;
  std::vector<int32_t> stop_tokens;       // besides the tokenizer's end-of-generation ids
  std::vector<std::string> stop_strings;  // text is held back until it cannot start one
  bool emit_special = false;              // stream the text of control tokens too
  // Log-probabilities of each chosen token (and of the `top_logprobs` most likely ones) under
  // the model's distribution: log-softmax of the raw logits, before bias, penalties or
  // truncation (as OpenAI reports them). Off: nothing is computed.
  bool logprobs = false;
  int32_t top_logprobs = 0;  // 0..20
};

struct TokenLogprob {
  int32_t id = -1;
  float logprob = 0;
};

struct TokenEvent {
  int32_t id = -1;    // -1: an event that only carries held-back text (the end of a generation)
  std::string text;   // complete UTF-8 only; may be empty while bytes or a stop string pend
  bool ends = false;  // the end-of-generation or stop token that ended it (text not emitted)
  float logprob = 0;  // of `id`, when the request asked for logprobs
  std::vector<TokenLogprob> top;  // most likely first, when top_logprobs > 0
};

struct GenerationStats {
  int64_t n_prompt = 0;         // prompt tokens given
  int64_t n_prompt_reused = 0;  // of those, taken from the session's cache
  int64_t n_generated = 0;
  double prompt_seconds = 0;    // prefill of the tokens not reused
  double generate_seconds = 0;  // after the first token
  double first_token_seconds = 0;
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated ids (a stop token is included, a stop string's not)
  std::string text;
  StopReason stop_reason = StopReason::kMaxTokens;
  std::string stop_string;  // the stop string that ended it (kStopString)
  GenerationStats stats;
};

class Session {
 public:
  explicit Session(std::shared_ptr<Model> model, const SessionOptions& options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Appends `tokens` after those already committed and returns the logits, row-major
  // [rows, n_vocab]: the last position only, or every appended position. Throws when the
  // context would overflow.
  std::vector<float> eval(std::span<const int32_t> tokens, bool all_positions = false);
  // The same without copying the logits out: last_logits() then holds the last position's
  // (valid until the next call that evaluates tokens; unspecified after one that threw).
  void append(std::span<const int32_t> tokens);
  std::span<const float> last_logits() const;

  // Makes the session hold `request.prompt` (reusing the longest common prefix), then samples
  // until a stop. `on_token` sees each token as it is chosen; returning false stops (as
  // kCancelled). `cancel` is checked between tokens and between prefill chunks.
  GenerationResult generate(const GenerationRequest& request,
                            const std::function<bool(const TokenEvent&)>& on_token = {},
                            const std::atomic<bool>* cancel = nullptr);

  // Called with every named intermediate tensor of later forwards (names as llama.cpp's graph
  // callbacks: attn_norm, Qcur, kqv_out, ffn_out, l_out, result_norm …; layer -1 outside the
  // layers). data: [n_tokens, row] float32, valid during the call. Empty: none. For tests and
  // tools that locate the first divergence from a reference; it slows the forward down.
  using ActivationCallback = std::function<void(std::string_view name, int64_t layer,
                                                const float* data, int64_t n_tokens, int64_t row)>;
  void set_activation_callback(ActivationCallback callback);

  void clear();  // forget every committed token
  // The prompt tokens the next generate() would take from the cache for `prompt` (what a
  // scheduler compares to pick the session holding the longest shared prefix).
  int64_t reusable_prefix(std::span<const int32_t> prompt) const;
  // Makes this session hold the first `n_tokens` committed tokens of `other` and their cached
  // keys and values, as if it had evaluated them (a shared system prompt, without evaluating it
  // again). Throws when the sessions differ in model, context, batch or KV type, or `other` no
  // longer holds those positions (a sliding-window ring overwrote them, or the model has
  // recurrent layers, whose state holds all of `other`'s tokens, and n_tokens is fewer).
  void copy_prefix_from(const Session& other, int64_t n_tokens);
  const std::vector<int32_t>& tokens() const;  // committed ids, in order
  int64_t n_ctx() const;
  const Model& model() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  friend class Generation;
};

// One generation advanced a step at a time, so that one thread can interleave many of them
// (the server's scheduler); Session::generate is one of these run to its end. A step is a
// prefill chunk of at most n_batch tokens (no events) or one sampled token (one event; the
// last step may add one with the held-back text). The session must outlive it and must not
// be used for anything else meanwhile.
class Generation {
 public:
  // Validates the request (prompt ids, sampling, context) and throws sluice::Error naming
  // what is wrong; nothing runs until the first step. `cancel` is checked at every step.
  Generation(Session& session, GenerationRequest request,
             const std::atomic<bool>* cancel = nullptr);
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Runs one step, appending its events to `events`; returns false once finished.
  bool step(std::vector<TokenEvent>& events);
  // One step of several generations together (the server's batched decode): those decoding
  // sample their next token and evaluate them all in one forward, each against its own
  // session, so every weight (and, for MoE, every needed expert) is read once per step; those
  // still prefilling run one chunk each. Numbers equal stepping each alone, bit for bit.
  // events[i] receives generations[i]'s events. The sessions must belong to one model.
  static void step_all(std::span<Generation* const> generations,
                       std::span<std::vector<TokenEvent>* const> events);
  bool finished() const;
  bool prefilling() const;  // no token sampled yet
  void stop();              // finish at the next step, as cancelled
  const GenerationResult& result() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Peak resident set size of this process in bytes (for --stats).
uint64_t peak_rss_bytes();

}  // namespace sluice
