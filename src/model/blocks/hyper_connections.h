// Hyper-connections (DeepSeek V4): the residual is hc parallel streams instead of one. Before a
// branch, a small mixer reads all streams (RMS-normed together, through hc_*_fn) and yields three
// things per token: `pre`, the weights that fold the streams into the branch's input; `post`,
// how much of the branch output each stream receives; and `comb`, an hc × hc matrix, made doubly
// stochastic by Sinkhorn iterations, that remixes the old streams. After the branch each stream
// becomes post[dst] · branch + Σ_src comb[dst, src] · stream[src], replacing the residual add.
// The output head folds the streams once more with its own `pre` weights. Knows no architecture.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_array.h"
#include "model/blocks/trace.h"
#include "model/weights.h"

namespace sluice::model {

struct HyperConnectionShape {
  int64_t n_embd = 0;
  int64_t n_stream = 0;  // hyper_connection.count
  int64_t sinkhorn_iterations = 0;
  float eps = 1e-6f;       // hyper_connection.epsilon
  float norm_eps = 1e-6f;  // of the streams' joint RMS norm

  int64_t n_mix() const { return (2 + n_stream) * n_stream; }  // pre, post, comb
};

// One mixer: fn [n_stream * n_embd, n_out], base [n_out], scale [3] (pre, post, comb; the head's
// has one entry and no post or comb).
struct HyperConnectionWeights {
  MatrixView fn;
  std::vector<float> base;
  std::vector<float> scale;
};

// <prefix>_fn.weight, <prefix>_base.weight, <prefix>_scale.weight (e.g. "blk.3.hc_attn"); `head`:
// the output head's mixer (n_stream outputs, one scale).
HyperConnectionWeights bind_hyper_connection(WeightBinder& binder, const std::string& prefix,
                                             const HyperConnectionShape& shape, bool head);

// Backend memory: the mixers' numbers never leave the backend.
struct HyperConnectionScratch {
  BackendArray<float> normed;  // [n_batch, n_stream * n_embd]
  BackendArray<float> mixes;   // [n_batch, n_mix]
  BackendArray<float> pre;     // [n_batch, n_stream]
  BackendArray<float> post;    // [n_batch, n_stream]
  BackendArray<float> comb;    // [n_batch, n_stream (src), n_stream (dst)]
  BackendArray<float> mixed;   // [n_batch, n_stream, n_embd]
  void reserve(Backend& backend, const HyperConnectionShape& shape, int64_t n_batch);
};

// The branch input x [n_tokens, n_embd] from streams [n_tokens, n_stream, n_embd]; leaves post
// and comb in the scratch for hc_post. `name` and `layer` label the traces. All backend ops
// (Backend::hyper_mix, hyper_fold): x, streams and the scratch are backend memory.
void hc_pre(Backend& backend, const HyperConnectionWeights& w, const HyperConnectionShape& s,
            const float* streams, int64_t n_tokens, HyperConnectionScratch& scratch, float* x,
            const char* name, int64_t layer, const Trace& trace);

// streams = post · branch + comb · streams, with the post and comb of the last hc_pre
// (Backend::hyper_expand into the scratch, then copied back).
void hc_post(Backend& backend, const HyperConnectionShape& s, const float* branch, int64_t n_tokens,
             HyperConnectionScratch& scratch, float* streams);

// The output head's fold: x [n_tokens, n_embd] from streams, weighted by the head mixer's pre.
void hc_head(Backend& backend, const HyperConnectionWeights& w, const HyperConnectionShape& s,
             const float* streams, int64_t n_tokens, HyperConnectionScratch& scratch, float* x);

}  // namespace sluice::model
