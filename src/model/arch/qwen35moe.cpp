// qwen35moe (Qwen3.5 MoE, e.g. 35B-A3B): qwen35's hybrid layers (blocks/hybrid_decoder) with
// every FFN routed experts (softmax, top-k, renormalised) plus a sigmoid-gated shared expert.
#include "model/arch/architectures.h"
#include "model/blocks/hybrid_decoder.h"

namespace sluice::model {

std::unique_ptr<LanguageModel> make_qwen35moe(const ModelFile& file) {
  HybridDecoderOptions options;
  options.key_heads = KeyHeadSharing::kTiled;
  options.rope_sections = true;
  options.moe = true;
  return make_hybrid_decoder(file, "qwen35moe", options);
}

}  // namespace sluice::model
