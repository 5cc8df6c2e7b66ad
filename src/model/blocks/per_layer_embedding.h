// Per-layer input embeddings (Gemma 4's small models, "PLE"): besides its token embedding, every
// token gets a small vector for each layer, looked up in per_layer_token_embd and mixed with a
// normed projection of the scaled token embedding; at the end of each layer the residual stream
// gates that layer's vector and adds its projection back. Computed as llama.cpp's gemma4 graph
// does. Knows no architecture beyond the tensor names.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_array.h"
#include "model/blocks/trace.h"
#include "model/weights.h"

namespace sluice::model {

struct PerLayerEmbeddingLayer {
  MatrixView inp_gate;           // [n_embd, n_embd_per_layer] blk.N.inp_gate.weight
  MatrixView proj;               // [n_embd_per_layer, n_embd] blk.N.proj.weight
  std::vector<float> post_norm;  // [n_embd] blk.N.post_norm.weight
};

struct PerLayerEmbeddingWeights {
  int64_t n_embd = 0;
  int64_t n_embd_per_layer = 0;  // 0: the model has none
  int64_t n_layer = 0;
  MatrixView token_embd;                       // [n_embd_per_layer * n_layer, n_vocab]
  MatrixView model_proj;                       // [n_embd, n_embd_per_layer * n_layer]
  std::vector<float> proj_norm;                // [n_embd_per_layer]
  std::vector<PerLayerEmbeddingLayer> layers;  // [n_layer]
};

// Binds per_layer_{token_embd,model_proj,proj_norm}.weight and every layer's inp_gate, proj and
// post_norm; n_embd_per_layer 0 binds nothing.
PerLayerEmbeddingWeights bind_per_layer_embedding(WeightBinder& binder, int64_t n_embd,
                                                  int64_t n_embd_per_layer, int64_t n_layer,
                                                  int64_t n_vocab);

// The backend's memory, like the rest of the forward's activations.
struct PerLayerEmbeddingScratch {
  BackendArray<float> inputs;    // [n_batch, n_layer, n_embd_per_layer] every layer's vector
  BackendArray<float> selected;  // [n_batch, n_layer, n_embd_per_layer] the looked-up rows
  BackendArray<float> gate;      // [n_batch, n_embd_per_layer]
  BackendArray<float> input;     // [n_batch, n_embd_per_layer] one layer's vectors, gathered
  BackendArray<float> out;       // [n_batch, n_embd]
  void reserve(Backend& backend, const PerLayerEmbeddingWeights& w, int64_t n_batch);
};

// Every layer's input vectors for the chunk's tokens, from their ids (as get_rows reads them: the
// backend's memory where it is not the host's) and x [n_tokens, n_embd], the token embeddings
// already scaled as the first layer sees them.
void per_layer_inputs(Backend& backend, const PerLayerEmbeddingWeights& w, const int32_t* tokens,
                      const float* x, int64_t n_tokens, float eps, PerLayerEmbeddingScratch& s,
                      const Trace& trace);

// x [n_tokens, n_embd] += post_norm(proj(gelu(inp_gate x) * this layer's input)).
void add_per_layer_input(Backend& backend, const PerLayerEmbeddingWeights& w, int64_t layer,
                         float* x, int64_t n_tokens, float eps, PerLayerEmbeddingScratch& s,
                         const Trace& trace);

}  // namespace sluice::model
