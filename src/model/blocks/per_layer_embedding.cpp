// Per-layer input embeddings: binding, the chunk's per-layer vectors, and each layer's use of them.
#include "model/blocks/per_layer_embedding.h"

#include <cmath>

namespace sluice::model {

PerLayerEmbeddingWeights bind_per_layer_embedding(WeightBinder& binder, int64_t n_embd,
                                                  int64_t n_embd_per_layer, int64_t n_layer,
                                                  int64_t n_vocab) {
  PerLayerEmbeddingWeights w;
  w.n_embd = n_embd;
  w.n_embd_per_layer = n_embd_per_layer;
  w.n_layer = n_layer;
  if (n_embd_per_layer == 0) return w;
  const int64_t n_all = n_embd_per_layer * n_layer;
  w.token_embd = binder.matrix("per_layer_token_embd.weight", n_all, n_vocab);
  w.model_proj = binder.matrix("per_layer_model_proj.weight", n_embd, n_all);
  w.proj_norm = binder.vector("per_layer_proj_norm.weight", n_embd_per_layer);
  w.layers.resize(size_t(n_layer));
  for (int64_t il = 0; il < n_layer; ++il) {
    PerLayerEmbeddingLayer& l = w.layers[size_t(il)];
    l.inp_gate = binder.matrix(layer_tensor(il, "inp_gate.weight"), n_embd, n_embd_per_layer);
    l.proj = binder.matrix(layer_tensor(il, "proj.weight"), n_embd_per_layer, n_embd);
    l.post_norm = binder.vector(layer_tensor(il, "post_norm.weight"), n_embd);
  }
  return w;
}

void PerLayerEmbeddingScratch::reserve(Backend& backend, const PerLayerEmbeddingWeights& w,
                                       int64_t n_batch) {
  const int64_t n_all = w.n_embd_per_layer * w.n_layer;
  inputs.resize(backend, size_t(n_batch * n_all));
  selected.resize(backend, size_t(n_batch * n_all));
  gate.resize(backend, size_t(n_batch * w.n_embd_per_layer));
  input.resize(backend, size_t(n_batch * w.n_embd_per_layer));
  out.resize(backend, size_t(n_batch * w.n_embd));
}

void per_layer_inputs(Backend& backend, const PerLayerEmbeddingWeights& w, const int32_t* tokens,
                      const float* x, int64_t n_tokens, float eps, PerLayerEmbeddingScratch& s,
                      const Trace& trace) {
  const int64_t n_pl = w.n_embd_per_layer;
  const int64_t n_all = n_pl * w.n_layer;
  float* selected = s.selected.data();  // [n_tokens, n_layer, n_pl]
  backend.get_rows(w.token_embd, tokens, n_tokens, selected);
  backend.scale(selected, std::sqrt(float(n_pl)), n_tokens * n_all);
  trace("inp_per_layer_selected", -1, selected, n_all);

  // The projection of the token embedding, normed per layer's slice, joins the looked-up rows;
  // the sum is scaled by 1/sqrt(2) so the two halves keep the variance of one.
  float* inputs = s.inputs.data();  // [n_tokens, n_layer, n_pl]
  backend.matmul(w.model_proj, x, inputs, n_tokens);
  backend.scale(inputs, 1.0f / std::sqrt(float(w.n_embd)), n_tokens * n_all);
  backend.rms_norm(inputs, w.proj_norm.data(), inputs, n_tokens * w.n_layer, n_pl, eps);
  trace("per_layer_proj", -1, inputs, n_all);
  backend.add(inputs, selected, n_tokens * n_all);
  backend.scale(inputs, 1.0f / std::sqrt(2.0f), n_tokens * n_all);
  trace("inp_per_layer", -1, inputs, n_all);
}

void add_per_layer_input(Backend& backend, const PerLayerEmbeddingWeights& w, int64_t layer,
                         float* x, int64_t n_tokens, float eps, PerLayerEmbeddingScratch& s,
                         const Trace& trace) {
  const PerLayerEmbeddingLayer& l = w.layers[size_t(layer)];
  const int64_t n_pl = w.n_embd_per_layer;
  const int64_t n_all = n_pl * w.n_layer;
  // This layer's slice of every token's vectors: a column block of the rows.
  backend.copy_strided_rows(s.inputs.data() + layer * n_pl, n_all, s.input.data(), n_pl, n_tokens,
                            n_pl);
  backend.matmul(l.inp_gate, x, s.gate.data(), n_tokens);
  // gelu(gate) * input is a GeGLU with the layer's vector as its "up" half; ggml's GELU and
  // GeGLU share the F16 table, so the numbers are those of llama.cpp's gelu-then-multiply.
  backend.glu(GluActivation::kGeluTanhF16, s.gate.data(), s.input.data(), n_tokens, n_pl);
  backend.matmul(l.proj, s.gate.data(), s.out.data(), n_tokens);
  backend.rms_norm(s.out.data(), l.post_norm.data(), s.out.data(), n_tokens, w.n_embd, eps);
  trace("per_layer_embd_out", layer, s.out.data(), w.n_embd);
  backend.add(x, s.out.data(), n_tokens * w.n_embd);
}

}  // namespace sluice::model
