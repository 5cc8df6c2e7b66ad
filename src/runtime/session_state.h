// Session::Impl: one conversation's state on a LoadedModel — the KV cache, the committed token
// ids and the logits buffer — and the two steps everything
// else is made of: bring the cache to a given prefix (reusing what matches) and run a chunked
// forward. Owned by one thread at a time.
#pragma once

#include <atomic>
#include <memory>
#include <span>
#include <vector>

#include "model/kv_cache.h"
#include "runtime/loaded_model.h"
#include "sluice/engine.h"

namespace sluice {

struct Session::Impl {
  Impl(std::shared_ptr<Model> model, const SessionOptions& options);
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // Appends `tokens` (prefill in chunks of n_batch) and leaves the logits of the last token in
  // last_logits, or of every token in `all` when given ([n_tokens, n_vocab]). Returns false
  // when `cancel` was raised between chunks (the tokens done so far stay committed).
  bool append(std::span<const int32_t> tokens, std::vector<float>* all,
              const std::atomic<bool>* cancel);
  // One forward of at most n_batch tokens; `all` (when given) receives [n, n_vocab] logits.
  void forward_chunk(std::span<const int32_t> tokens, float* all);
  // One forward of new tokens for several sessions of one model (a batched step: one token of
  // each decoding request, a prefill chunk of each starting one): every weight read once for
  // all, each run of tokens attending to its own cache. Leaves each session's logits (of its
  // last token) in its last_logits, bit for bit what forward_chunk would have. The tokens of
  // all items fit in the first session's n_batch.
  struct BatchItem {
    Impl* session;
    std::span<const int32_t> tokens;
  };
  static void forward_batch(std::span<const BatchItem> items);
  // The committed tokens `prompt` could keep (see rewind_to_common_prefix), without changing them.
  int64_t common_prefix(std::span<const int32_t> prompt) const;
  // Keeps the longest prefix of the committed tokens that `prompt` starts with, and can still
  // be continued (sliding rings; recurrent layers: all committed tokens or none), leaving at
  // least one token of `prompt` to evaluate.
  int64_t rewind_to_common_prefix(std::span<const int32_t> prompt);
  void check_ids(std::span<const int32_t> tokens) const;
  // check_ids, and that the tokens fit after those committed (throws "context full" if not).
  void check_fits(std::span<const int32_t> tokens) const;

  std::shared_ptr<LoadedModel> model;
  int64_t n_ctx = 0;
  int64_t n_batch = 0;
  int64_t n_vocab = 0;
  model::KvCache kv;                           // in the model's backend's memory
  std::vector<int32_t> tokens;                 // committed ids; tokens.size() is the next position
  std::vector<float> chunk_logits;             // [items, n_vocab] scratch of forward_batch
  std::vector<float> last_logits;              // [n_vocab] of the last committed token
  bool logits_pinned = false;                  // last_logits is the backend's pinned output
  std::vector<model::SequenceRun> batch_runs;  // [n_batch] scratch of forward_batch
  std::vector<int32_t> batch_tokens;           // [n_batch] scratch of forward_batch

  // Forwards the model's ActivationObserver calls to the public callback.
  struct CallbackObserver final : model::ActivationObserver {
    ActivationCallback callback;
    void observe(std::string_view name, int64_t layer, const float* data, int64_t n_tokens,
                 int64_t row) override {
      callback(name, layer, data, n_tokens, row);
    }
  };
  CallbackObserver observer;
};

}  // namespace sluice
