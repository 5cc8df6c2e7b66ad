// Hyper-connections in llama.cpp's deepseek4 order of operations (products rounded before each
// add, sums of rows in double, softmax scaled by 1 / Σ) — the arithmetic lives in the backend's
// hyper_mix / hyper_fold / hyper_expand ops; this file strings them together.
#include "model/blocks/hyper_connections.h"

namespace sluice::model {
namespace {

// mixes [n_tokens, n_out] from the streams' joint RMS norm.
void mix(Backend& backend, const HyperConnectionWeights& w, const HyperConnectionShape& s,
         const float* streams, int64_t n_tokens, HyperConnectionScratch& m) {
  const int64_t width = s.n_stream * s.n_embd;
  backend.rms_norm(streams, nullptr, m.normed.data(), n_tokens, width, s.norm_eps);
  backend.matmul(w.fn, m.normed.data(), m.mixes.data(), n_tokens);
}

}  // namespace

HyperConnectionWeights bind_hyper_connection(WeightBinder& binder, const std::string& prefix,
                                             const HyperConnectionShape& s, bool head) {
  const int64_t n_out = head ? s.n_stream : s.n_mix();
  HyperConnectionWeights w;
  w.fn = binder.matrix(prefix + "_fn.weight", s.n_stream * s.n_embd, n_out);
  w.base = binder.vector(prefix + "_base.weight", n_out);
  w.scale = binder.vector(prefix + "_scale.weight", head ? 1 : 3);
  return w;
}

void HyperConnectionScratch::reserve(Backend& backend, const HyperConnectionShape& s,
                                     int64_t n_batch) {
  normed.resize(backend, size_t(n_batch * s.n_stream * s.n_embd));
  mixes.resize(backend, size_t(n_batch * s.n_mix()));
  pre.resize(backend, size_t(n_batch * s.n_stream));
  post.resize(backend, size_t(n_batch * s.n_stream));
  comb.resize(backend, size_t(n_batch * s.n_stream * s.n_stream));
  mixed.resize(backend, size_t(n_batch * s.n_stream * s.n_embd));
}

void hc_pre(Backend& backend, const HyperConnectionWeights& w, const HyperConnectionShape& s,
            const float* streams, int64_t n, HyperConnectionScratch& m, float* x, const char* name,
            int64_t layer, const Trace& trace) {
  mix(backend, w, s, streams, n, m);
  backend.hyper_mix(m.mixes.data(), w.scale.data(), w.base.data(), n, s.n_stream,
                    s.sinkhorn_iterations, s.eps, m.pre.data(), m.post.data(), m.comb.data());
  backend.hyper_fold(streams, m.pre.data(), n, s.n_stream, s.n_embd, x);
  trace(name, layer, x, s.n_embd);
}

void hc_post(Backend& backend, const HyperConnectionShape& s, const float* branch, int64_t n,
             HyperConnectionScratch& m, float* streams) {
  backend.hyper_expand(branch, m.post.data(), m.comb.data(), streams, n, s.n_stream, s.n_embd,
                       m.mixed.data());
  backend.copy(streams, m.mixed.data(), sizeof(float) * size_t(n * s.n_stream * s.n_embd));
}

void hc_head(Backend& backend, const HyperConnectionWeights& w, const HyperConnectionShape& s,
             const float* streams, int64_t n, HyperConnectionScratch& m, float* x) {
  mix(backend, w, s, streams, n, m);
  backend.hyper_mix(m.mixes.data(), w.scale.data(), w.base.data(), n, s.n_stream,
                    s.sinkhorn_iterations, s.eps, m.pre.data(), nullptr, nullptr);
  backend.hyper_fold(streams, m.pre.data(), n, s.n_stream, s.n_embd, x);
}

}  // namespace sluice::model
