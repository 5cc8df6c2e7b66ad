// qwen35 (Qwen3.5 dense): the hybrid decoder — gated delta net layers with three of every four
// layers (value heads reading key heads tiled, split ssm_beta / ssm_alpha), gated full attention
// with M-RoPE sections on the fourth (for text the same as NeoX RoPE), dense SwiGLU FFNs.
#include "model/arch/architectures.h"
#include "model/blocks/hybrid_decoder.h"

namespace sluice::model {

std::unique_ptr<LanguageModel> make_qwen35(const ModelFile& file) {
  HybridDecoderOptions options;
  options.key_heads = KeyHeadSharing::kTiled;
  options.rope_sections = true;
  return make_hybrid_decoder(file, "qwen35", options);
}

}  // namespace sluice::model
