// qwen3moe (Qwen3-30B-A3B, Qwen3-235B-A22B): qwen3's decoder (per-head Q/K norms, NeoX RoPE)
// with every FFN a Mixture of Experts — softmax router, top-k, the chosen weights renormalised.
#include "model/arch/architectures.h"
#include "model/blocks/pre_norm_decoder.h"

namespace sluice::model {

std::unique_ptr<LanguageModel> make_qwen3moe(const ModelFile& file) {
  PreNormDecoderOptions options;
  options.rope_style = RopeStyle::kNeox;
  options.require_qk_norm = true;
  options.moe = MoeUse::kRequired;
  options.moe_norm_weights = true;
  return make_pre_norm_decoder(file, "qwen3moe", options);
}

}  // namespace sluice::model
