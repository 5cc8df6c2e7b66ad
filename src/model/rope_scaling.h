// RopeScaling: the RoPE settings llama.cpp derives from a file's rope.scaling.* keys when it
// creates a context — none, linear (freq_scale = 1 / factor) or YaRN, with YaRN's
// extrapolation ramp (beta_fast, beta_slow over original_context_length) and the attention
// factor llama_context computes (cparams.yarn_attn_factor) — so an architecture hands ggml's
// rope the same arguments. Knows no architecture beyond the one DeepSeek rule it is told of.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "model/hparams.h"

namespace sluice::model {

struct RopeScaling {
  float freq_scale = 1.0f;
  float ext_factor = 0.0f;   // 1 for YaRN
  float attn_factor = 1.0f;  // what llama.cpp passes ggml_rope_ext as attn_factor
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  int64_t n_ctx_orig = 0;
  float yarn_log_mul = 0.0f;  // DeepSeek's mscale_all_dim (0: none)
};

// deepseek_yarn: read rope.scaling.yarn_log_multiplier as llama.cpp's deepseek2 loader does
// (undoing the converter's factor 0.1) and apply its DeepSeek V2 mscale rule. Refuses scaling
// types other than none, linear and yarn, naming the key.
RopeScaling read_rope_scaling(const ArchMetadata& meta, int64_t n_ctx_train, bool deepseek_yarn);

// Fills config's freq_scale and YaRN fields.
void apply_rope_scaling(const RopeScaling& scaling, RopeConfig& config);

}  // namespace sluice::model
