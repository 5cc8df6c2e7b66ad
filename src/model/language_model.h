// LanguageModel: what every architecture implements — its hyper-parameters, its KV layout and
// one forward over a chunk of tokens that appends them to the KV cache and writes logits. The
// registry (registry.h) builds one from a ModelFile; runtime/ drives it. An ActivationObserver
// sees every named intermediate tensor, so tests can find the first layer that diverges from a
// reference.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "experts/expert_layout.h"
#include "experts/expert_source.h"
#include "model/kv_cache.h"

namespace sluice::model {

class ActivationObserver {
 public:
  virtual ~ActivationObserver() = default;
  // data: [n_tokens, row] float32, valid only during the call. layer -1: outside the layers.
  virtual void observe(std::string_view name, int64_t layer, const float* data, int64_t n_tokens,
                       int64_t row) = 0;
};

struct ForwardRequest {
  std::span<const int32_t> tokens;         // the chunk; at most the reserved n_batch tokens
  std::span<const SequenceRun> sequences;  // covering the tokens in order, each its own cache
  bool all_logits = false;                 // logits for every token, else only the last
  float* logits = nullptr;                 // [all_logits ? n_tokens : 1, n_vocab]
  ActivationObserver* observer = nullptr;
  experts::ExpertSource* experts = nullptr;  // required when expert_layout() is not empty
  // Where the routed experts are computed when not on the forward's backend: a host-memory
  // backend (the CPU) while the rest runs on the GPU. nullptr: the forward's backend.
  Backend* expert_backend = nullptr;
};

struct ModelSummary {
  std::string architecture;
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_ctx_train = 0;
};

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;
  virtual const ModelSummary& summary() const = 0;
  virtual std::vector<KvLayerSpec> kv_layout() const = 0;
  // Buffers sized for chunks of n_batch tokens in `backend`'s memory; called once per session
  // before forwards, which must then use that backend.
  virtual void reserve(Backend& backend, int64_t n_batch) = 0;
  // Whether forward keeps every activation in the backend's memory and touches it only through
  // backend ops, so that it runs on a GPU backend; false: host-memory backends (the CPU) only.
  virtual bool runs_on_device() const { return false; }
  // Where the routed experts live (streamed or viewed by an ExpertSource); empty when dense.
  virtual const experts::ExpertLayout& expert_layout() const { return no_experts_; }
  // Whether a one-token forward on `backend` reads data back to the host before its end (a MoE
  // router choosing on the host), which a recorded step cannot (Backend::begin_recorded_step).
  // experts / expert_backend as the forward's request will have them.
  virtual bool decode_reads_host(const Backend& backend, const experts::ExpertSource* experts,
                                 const Backend* expert_backend) const {
    (void)backend, (void)experts, (void)expert_backend;
    return !expert_layout().empty();
  }
  virtual void forward(Backend& backend, const ForwardRequest& request) = 0;

 private:
  experts::ExpertLayout no_experts_;
};

}  // namespace sluice::model
