// HybridDecoder: the Qwen3-Next / Qwen3.5 decoder, recurrent and attention layers interleaved.
// Every layer is x += mixer(rms_norm(x)); x += ffn(rms_norm(x)) (post_attention_norm as the
// second norm), the mixer a gated delta net (blocks/gated_delta_net) except on every
// full_attention_interval-th layer, which has gated full attention: attn_q yields query and gate
// per head, per-head Q/K norms, NeoX RoPE on the first rope.dimension_count dimensions, and the
// sigmoid of the gate on the output. The FFN is a SwiGLU, or routed experts plus a gated shared
// expert (blocks/shared_expert_moe). The architecture files (arch/qwen35*, arch/qwen3next) say
// which variant they are.
#pragma once

#include <memory>
#include <string>

#include "format/model_file.h"
#include "model/blocks/gated_delta_net.h"
#include "model/language_model.h"

namespace sluice::model {

struct HybridDecoderOptions {
  KeyHeadSharing key_heads = KeyHeadSharing::kTiled;
  bool joint_beta_alpha = false;  // ssm_ba instead of ssm_beta + ssm_alpha
  bool moe = false;               // every FFN: routed experts + gated shared expert
  // The file gives M-RoPE sections (rope.dimension_sections, qwen35): a text position is the same
  // in every section, so the rotation is NeoX RoPE as long as no rotated pair falls in the 4th
  // section (whose position component llama.cpp leaves 0 for text); otherwise refused.
  bool rope_sections = false;
};

std::unique_ptr<LanguageModel> make_hybrid_decoder(const ModelFile& file, const std::string& arch,
                                                   const HybridDecoderOptions& options);

}  // namespace sluice::model
