// Session: construction, eval, prefix reuse and the chunked prefill.
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "runtime/session_state.h"

namespace sluice {
namespace {

std::shared_ptr<LoadedModel> as_loaded(std::shared_ptr<Model> model) {
  auto loaded = std::dynamic_pointer_cast<LoadedModel>(std::move(model));
  if (!loaded) fail("session: the model was not loaded by Model::load");
  return loaded;
}

int64_t context_size(const LoadedModel& model, const SessionOptions& options) {
  if (options.n_ctx < 0) fail("context size must be positive, got ", options.n_ctx);
  const int64_t train = model.info().n_ctx_train;
  return options.n_ctx == 0 ? train : std::min(options.n_ctx, train);
}

}  // namespace

Session::Impl::Impl(std::shared_ptr<Model> model_in, const SessionOptions& options)
    : model(as_loaded(std::move(model_in))),
      n_ctx(context_size(*model, options)),
      n_batch(std::clamp<int64_t>(options.n_batch, 1, n_ctx)),
      n_vocab(model->info().n_vocab),
      kv(model->language_model().kv_layout(), n_ctx, n_batch,
         options.kv_type == KvType::kF32 ? KvElement::kF32 : KvElement::kF16, model->backend()) {
  if (options.n_batch < 1) fail("batch size must be positive, got ", options.n_batch);
  batch_runs.reserve(size_t(n_batch));
  batch_tokens.reserve(size_t(n_batch));
  last_logits.resize(size_t(n_vocab));
  tokens.reserve(size_t(n_ctx));
  std::lock_guard lock(model->forward_mutex());
  model->language_model().reserve(model->backend(), n_batch);
  // The last position's logits land here straight from the device (one copy fewer per token).
  logits_pinned =
      model->backend().pin_host_output(last_logits.data(), sizeof(float) * last_logits.size());
}

Session::Impl::~Impl() {
  if (!logits_pinned) return;
  std::lock_guard lock(model->forward_mutex());
  model->backend().unpin_host_output(last_logits.data());
}

void Session::Impl::check_ids(std::span<const int32_t> ids) const {
  for (int32_t id : ids) {
    if (id < 0 || id >= n_vocab) {
      fail("token id ", id, " is outside the vocabulary (", n_vocab, " tokens)");
    }
  }
}

bool Session::Impl::append(std::span<const int32_t> ids, std::vector<float>* all,
                           const std::atomic<bool>* cancel) {
  check_fits(ids);  // before the first chunk, so a bad id or overflow commits nothing
  if (all != nullptr) all->resize(ids.size() * size_t(n_vocab));
  for (size_t done = 0; done < ids.size();) {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) return false;
    const size_t n = std::min(ids.size() - done, size_t(n_batch));
    forward_chunk(ids.subspan(done, n),
                  all != nullptr ? all->data() + done * size_t(n_vocab) : nullptr);
    done += n;
  }
  return true;
}

void Session::Impl::check_fits(std::span<const int32_t> ids) const {
  check_ids(ids);
  const int64_t n_past = int64_t(tokens.size());
  if (n_past + int64_t(ids.size()) > n_ctx) {
    fail("context full: ", n_past, " tokens held + ", ids.size(), " new exceed the context of ",
         n_ctx, " (use a larger --ctx)");
  }
}

void Session::Impl::forward_chunk(std::span<const int32_t> ids, float* all) {
  check_fits(ids);
  const int64_t n_past = int64_t(tokens.size());
  const size_t n = ids.size();
  const model::SequenceRun run{&kv, n_past, 0, int64_t(n)};
  model::ForwardRequest request;
  request.tokens = ids;
  request.sequences = std::span(&run, 1);
  request.all_logits = all != nullptr;
  // Straight into their destination: a failed forward leaves last_logits (or `all`)
  // unspecified, and the tokens uncommitted.
  request.logits = all != nullptr ? all : last_logits.data();
  if (observer.callback) request.observer = &observer;
  request.experts = model->experts();
  {
    std::lock_guard lock(model->forward_mutex());
    model->forward(request);
    if (request.experts != nullptr) request.experts->end_step();
  }
  tokens.insert(tokens.end(), ids.begin(), ids.end());
  if (all != nullptr) {
    std::memcpy(last_logits.data(), all + (n - 1) * size_t(n_vocab),
                sizeof(float) * size_t(n_vocab));
  }
}

void Session::Impl::forward_batch(std::span<const BatchItem> items) {
  // The lead session's scratch (tokens, runs, logits rows) holds the whole batch.
  Impl& lead = *items.front().session;
  lead.batch_runs.clear();
  lead.batch_tokens.clear();
  for (const BatchItem& item : items) {
    Impl& s = *item.session;
    if (s.model != lead.model) fail("batched forward: the sessions belong to different models");
    s.check_fits(item.tokens);
    lead.batch_runs.push_back({&s.kv, int64_t(s.tokens.size()), int64_t(lead.batch_tokens.size()),
                               int64_t(item.tokens.size())});
    lead.batch_tokens.insert(lead.batch_tokens.end(), item.tokens.begin(), item.tokens.end());
  }
  if (int64_t(lead.batch_tokens.size()) > lead.n_batch) {
    fail("batched forward: ", lead.batch_tokens.size(), " tokens exceed the batch of ",
         lead.n_batch);
  }
  // Grown on first need: a prefill's n_batch rows of logits are never all wanted at once.
  const size_t rows = items.size() * size_t(lead.n_vocab);
  if (lead.chunk_logits.size() < rows) lead.chunk_logits.resize(rows);
  model::ForwardRequest request;
  request.tokens = lead.batch_tokens;
  request.sequences = lead.batch_runs;
  request.logits = lead.chunk_logits.data();  // [items, n_vocab]: each run's last token
  request.experts = lead.model->experts();
  {
    std::lock_guard lock(lead.model->forward_mutex());
    lead.model->forward(request);
    if (request.experts != nullptr) request.experts->end_step();
  }
  for (size_t i = 0; i < items.size(); ++i) {
    Impl& s = *items[i].session;
    s.tokens.insert(s.tokens.end(), items[i].tokens.begin(), items[i].tokens.end());
    std::memcpy(s.last_logits.data(), lead.chunk_logits.data() + i * size_t(lead.n_vocab),
                sizeof(float) * size_t(lead.n_vocab));
  }
}

int64_t Session::Impl::common_prefix(std::span<const int32_t> prompt) const {
  size_t common = 0;
  while (common < tokens.size() && common < prompt.size() && tokens[common] == prompt[common]) {
    ++common;
  }
  // The last prompt token is always evaluated again: its logits start the generation.
  if (common == prompt.size() && common > 0) --common;
  // The cache decides what can really be kept: sliding rings may have moved past the prefix, and
  // a model with recurrent layers (qwen35, qwen3next) keeps either the whole cached sequence —
  // when the prompt extends all of it — or nothing: its state cannot be cut back, so any shorter
  // match restarts from position 0, where the forward zeroes the state.
  return kv.reusable_prefix(int64_t(common), int64_t(tokens.size()));
}

int64_t Session::Impl::rewind_to_common_prefix(std::span<const int32_t> prompt) {
  const int64_t keep = common_prefix(prompt);
  tokens.resize(size_t(keep));
  return keep;
}

Session::Session(std::shared_ptr<Model> model, const SessionOptions& options)
    : impl_(std::make_unique<Impl>(std::move(model), options)) {}
Session::~Session() = default;

std::vector<float> Session::eval(std::span<const int32_t> ids, bool all_positions) {
  if (ids.empty()) fail("eval: no tokens given");
  std::vector<float> all;
  impl_->append(ids, all_positions ? &all : nullptr, nullptr);
  if (all_positions) return all;
  return impl_->last_logits;
}

void Session::append(std::span<const int32_t> ids) {
  if (ids.empty()) fail("append: no tokens given");
  impl_->append(ids, nullptr, nullptr);
}

std::span<const float> Session::last_logits() const {
  return impl_->last_logits;
}

void Session::set_activation_callback(ActivationCallback callback) {
  impl_->observer.callback = std::move(callback);
}

int64_t Session::reusable_prefix(std::span<const int32_t> prompt) const {
  return impl_->common_prefix(prompt);
}

void Session::copy_prefix_from(const Session& other, int64_t n_tokens) {
  const Impl& from = *other.impl_;
  if (from.model != impl_->model) fail("copy_prefix_from: the sessions belong to different models");
  if (n_tokens < 0 || n_tokens > int64_t(from.tokens.size())) {
    fail("copy_prefix_from: ", n_tokens, " tokens asked, the source holds ", from.tokens.size());
  }
  impl_->kv.copy_prefix_from(from.kv, n_tokens, int64_t(from.tokens.size()));
  impl_->tokens.assign(from.tokens.begin(), from.tokens.begin() + n_tokens);
}

void Session::clear() {
  impl_->tokens.clear();
}

const std::vector<int32_t>& Session::tokens() const {
  return impl_->tokens;
}

int64_t Session::n_ctx() const {
  return impl_->n_ctx;
}

const Model& Session::model() const {
  return *impl_->model;
}

}  // namespace sluice
