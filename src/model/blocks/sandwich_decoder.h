// SandwichDecoder: the decoder of the gemma line and its relatives (gemma3, muse-glimmer), where
// each branch is normed on the way in and on the way out: h = x + post_norm(attn(norm(x)));
// out = h + post_ffw_norm(ffn(ffn_norm(h))). Per layer it may slide or not, rotate or not, with
// its own RoPE base — the architecture file decides and passes the per-layer configs.
#pragma once

#include <memory>
#include <vector>

#include "model/blocks/attention.h"
#include "model/hparams.h"
#include "model/language_model.h"

namespace sluice::model {

struct SandwichDecoderConfig {
  std::string arch;
  DecoderHParams hp;
  GluActivation activation = GluActivation::kGeluTanh;
  float embd_scale = 1.0f;      // inputs multiplied by this (gemma: sqrt(n_embd))
  bool embd_norm = false;       // inputs RMS-normed without weights first (muse-glimmer)
  float post_norm_eps = 0.0f;   // of post_attention_norm and post_ffw_norm
  bool attn_gate = false;       // sigmoid output gate (attn_gate.weight)
  bool require_output = false;  // output.weight must exist (no tied embeddings)
  float logit_scale = 1.0f;
  float final_softcap = 0.0f;       // > 0: logits = cap * tanh(logits / cap)
  float norm_weight_offset = 0.0f;  // added to every RMS-norm weight at load (gemma from HF: 1)
  std::vector<AttentionLayerConfig> layers;  // [n_layer]
};

std::unique_ptr<LanguageModel> make_sandwich_decoder(const ModelFile& file,
                                                     SandwichDecoderConfig config);

// llama.cpp's sliding-window pattern of period n: layer il slides unless il % n == n - 1
// (n == 0: every layer slides).
std::vector<bool> sliding_pattern(int64_t n_layer, int64_t period);

}  // namespace sluice::model
