// qwen3next (Qwen3-Next-80B-A3B): the hybrid decoder of blocks/hybrid_decoder — gated delta net
// layers whose value heads read their key head in groups (repeat-interleaved, as llama.cpp
// builds this family) and whose beta / alpha come from one ssm_ba projection, gated full
// attention with NeoX RoPE every full_attention_interval layers, and every FFN routed experts
// plus a sigmoid-gated shared expert.
#include "model/arch/architectures.h"
#include "model/blocks/hybrid_decoder.h"

namespace sluice::model {

std::unique_ptr<LanguageModel> make_qwen3next(const ModelFile& file) {
  HybridDecoderOptions options;
  options.key_heads = KeyHeadSharing::kGrouped;
  options.joint_beta_alpha = true;
  options.moe = true;
  return make_hybrid_decoder(file, "qwen3next", options);
}

}  // namespace sluice::model
