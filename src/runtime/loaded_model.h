// LoadedModel: the Model behind the public API — the open model file (its mapping backs every
// resident weight), the architecture's LanguageModel, the tokenizer, and the thread pool its
// forwards run on. Sessions of one model take turns on it (forward_mutex): the pool runs one
// loop at a time and the LanguageModel's scratch is shared.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "backend/backend.h"
#include "core/thread_pool.h"
#include "experts/expert_source.h"
#include "format/model_file.h"
#include "model/language_model.h"
#include "runtime/snapshot_conversion.h"
#include "runtime/step_recording.h"
#include "sluice/engine.h"

namespace sluice {

class LoadedModel final : public Model {
 public:
  LoadedModel(const std::string& path, const ModelOptions& options);

  const ModelInfo& info() const override { return info_; }
  const TextTokenizer& tokenizer() const override { return tokenizer_; }
  const std::string& chat_template() const override { return tokenizer_.chat_template(); }
  std::vector<std::string> placement_explanation() const override { return placement_; }
  ExpertTelemetry expert_telemetry() const override;
  StepTelemetry step_telemetry() const override;
  void save_expert_profile(const std::string& path) const override;

  model::LanguageModel& language_model() { return *language_model_; }
  ThreadPool& pool() { return *pool_; }
  // The backend every session's forward runs on (ModelOptions::backend); sessions hold their KV
  // cache and the model its scratch in its memory.
  Backend& backend() { return *backend_; }
  // One forward step on the backend (callers hold forward_mutex). A one-token step of a model
  // without routed experts after another is recorded and replayed as one unit where the backend
  // can (CUDA graphs: nothing is read back before its logits) and measuring says it is faster
  // (step_recording.h).
  void forward(const model::ForwardRequest& request);
  // Where MoE layers get their routed experts; nullptr for a dense model.
  experts::ExpertSource* experts() { return experts_.get(); }
  std::mutex& forward_mutex() { return forward_mutex_; }

 private:
  void place_experts(const ModelOptions& options);
  void choose_backend(const ModelOptions& options);
  void place_experts_on_device(const ModelOptions& options);
  // The host tier of the routed experts (the streaming cache or the mapped file's views), below
  // the device slots when there are any.
  const experts::ExpertSource* host_experts() const;
  uint64_t kv_reserve_bytes() const;  // one session's KV cache, estimated
  uint64_t scratch_reserve_bytes() const;

  SnapshotConversion source_;  // first: the file below may be its temporary GGUF
  ModelFile file_;
  // Declared before the language model, whose scratch lives in the backend's memory and is
  // released through it; the CPU backend runs on the pool.
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Backend> expert_backend_;  // --cpu-moe: the CPU, for the routed experts
  // The hybrid placement's long chunks run their experts on the device (experts_ is then the
  // device slots, over the host tier the CPU reads): experts::kHybridDevicePrefillTokens.
  bool hybrid_device_prefill_ = false;
  std::unique_ptr<model::LanguageModel> language_model_;
  TextTokenizer tokenizer_;
  ModelInfo info_;
  experts::ExpertLayout expert_layout_;  // the model's, pointed at a sidecar when there is one
  std::unique_ptr<experts::ExpertSource> experts_;
  std::vector<std::string> placement_;
  mutable std::mutex forward_mutex_;              // also guards the expert counters telemetry reads
  int64_t last_step_tokens_ = 0;                  // tokens of the previous forward step
  uint64_t reruns_ = 0, plain_decode_steps_ = 0;  // decode steps that ran unrecorded
  StepRecording recording_;                       // whether decode steps are recorded (CUDA graphs)
};

// Threads to use when the caller says 0: the CPUs this process may run on.
int default_thread_count();

}  // namespace sluice
