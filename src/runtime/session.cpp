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
         options.kv_type == KvType::kF32 ? KvElement::kF32 : KvElement::kF16),
      backend(&model->pool()) {
  if (options.n_batch < 1) fail("batch size must be positive, got ", options.n_batch);
  chunk_logits.resize(size_t(n_batch * n_vocab));
  last_logits.resize(size_t(n_vocab));
  tokens.reserve(size_t(n_ctx));
  std::lock_guard lock(model->forward_mutex());
  model->language_model().reserve(n_batch);
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
  check_ids(ids);
  const int64_t n_past = int64_t(tokens.size());
  if (n_past + int64_t(ids.size()) > n_ctx) {
    fail("context full: ", n_past, " tokens held + ", ids.size(), " new exceed the context of ",
         n_ctx, " (use a larger --ctx)");
  }
  if (all != nullptr) all->resize(ids.size() * size_t(n_vocab));
  std::lock_guard lock(model->forward_mutex());
  for (size_t done = 0; done < ids.size();) {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) return false;
    const size_t n = std::min(ids.size() - done, size_t(n_batch));
    model::ForwardRequest request;
    request.tokens = ids.subspan(done, n);
    request.pos0 = int64_t(tokens.size());
    request.all_logits = all != nullptr;
    request.logits = chunk_logits.data();
    if (observer.callback) request.observer = &observer;
    request.experts = model->experts();
    model->language_model().forward(backend, kv, request);
    if (request.experts != nullptr) request.experts->end_step();
    tokens.insert(tokens.end(), request.tokens.begin(), request.tokens.end());
    const float* last = chunk_logits.data() + (request.all_logits ? (n - 1) * n_vocab : 0);
    std::memcpy(last_logits.data(), last, sizeof(float) * size_t(n_vocab));
    if (all != nullptr) {
      std::memcpy(all->data() + done * size_t(n_vocab), chunk_logits.data(),
                  sizeof(float) * n * size_t(n_vocab));
    }
    done += n;
  }
  return true;
}

int64_t Session::Impl::rewind_to_common_prefix(std::span<const int32_t> prompt) {
  size_t common = 0;
  while (common < tokens.size() && common < prompt.size() && tokens[common] == prompt[common]) {
    ++common;
  }
  // The last prompt token is always evaluated again: its logits start the generation.
  if (common == prompt.size() && common > 0) --common;
  const int64_t keep = kv.reusable_prefix(int64_t(common), int64_t(tokens.size()));
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

void Session::set_activation_callback(ActivationCallback callback) {
  impl_->observer.callback = std::move(callback);
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
