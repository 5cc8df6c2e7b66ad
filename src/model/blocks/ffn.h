// Gated feed-forward block: down(act(gate x) * up x), the SwiGLU / GeGLU of llama, qwen and
// gemma. act is SiLU or tanh-approximated GELU.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_array.h"
#include "model/blocks/trace.h"
#include "model/weights.h"

namespace sluice::model {

struct GluFfnWeights {
  MatrixView gate, up, down;  // [n_embd, n_ff], [n_embd, n_ff], [n_ff, n_embd]
};

GluFfnWeights bind_glu_ffn(WeightBinder& binder, int64_t layer, int64_t n_embd, int64_t n_ff);

struct FfnScratch {
  BackendArray<float> gate, up;  // [n_batch, n_ff]
  void reserve(Backend& backend, int64_t n_ff, int64_t n_batch);
};

// out [n_tokens, n_embd] = ffn(x [n_tokens, n_embd]).
void glu_ffn(Backend& backend, const GluFfnWeights& w, GluActivation act, int64_t layer,
             const float* x, int64_t n_tokens, FfnScratch& scratch, float* out, const Trace& trace);

}  // namespace sluice::model
