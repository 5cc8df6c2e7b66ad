// olmoe (OLMoE): the pre-norm decoder with Q and K each RMS-normed across all heads before
// NeoX RoPE, and every FFN a Mixture of Experts whose softmax weights are not renormalised.
#include "model/arch/architectures.h"
#include "model/blocks/pre_norm_decoder.h"

namespace sluice::model {

std::unique_ptr<LanguageModel> make_olmoe(const ModelFile& file) {
  PreNormDecoderOptions options;
  options.rope_style = RopeStyle::kNeox;
  options.require_qk_norm = true;
  options.qk_norm_across_heads = true;
  options.moe = MoeUse::kRequired;
  options.moe_norm_weights = false;
  return make_pre_norm_decoder(file, "olmoe", options);
}

}  // namespace sluice::model
