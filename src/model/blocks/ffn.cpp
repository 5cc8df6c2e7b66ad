// The gated feed-forward block.
#include "model/blocks/ffn.h"

namespace sluice::model {

GluFfnWeights bind_glu_ffn(WeightBinder& binder, int64_t layer, int64_t n_embd, int64_t n_ff) {
  GluFfnWeights w;
  w.gate = binder.matrix(layer_tensor(layer, "ffn_gate.weight"), n_embd, n_ff);
  w.up = binder.matrix(layer_tensor(layer, "ffn_up.weight"), n_embd, n_ff);
  w.down = binder.matrix(layer_tensor(layer, "ffn_down.weight"), n_ff, n_embd);
  return w;
}

void FfnScratch::reserve(Backend& backend, int64_t n_ff, int64_t n_batch) {
  gate.resize(backend, size_t(n_ff * n_batch));
  up.resize(backend, size_t(n_ff * n_batch));
}

void glu_ffn(Backend& backend, const GluFfnWeights& w, GluActivation act, int64_t layer,
             const float* x, int64_t n_tokens, FfnScratch& scratch, float* out,
             const Trace& trace) {
  const int64_t n_ff = w.gate.n_rows;
  const MatrixView ws[] = {w.gate, w.up};
  float* const ys[] = {scratch.gate.data(), scratch.up.data()};
  backend.matmul_shared_input(ws, ys, 2, x, n_tokens);
  trace("ffn_gate", layer, scratch.gate.data(), n_ff);
  trace("ffn_up", layer, scratch.up.data(), n_ff);
  backend.glu_matmul(w.down, act, scratch.gate.data(), scratch.up.data(), out, n_tokens);
  trace(act == GluActivation::kSilu ? "ffn_swiglu" : "ffn_geglu", layer, scratch.gate.data(), n_ff);
  trace("ffn_out", layer, out, w.down.n_rows);
}

}  // namespace sluice::model
