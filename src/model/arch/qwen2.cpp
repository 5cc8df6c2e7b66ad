// qwen2 (Qwen2, Qwen2.5): the pre-norm decoder with Q/K/V biases and NeoX-style RoPE.
#include "model/arch/architectures.h"
#include "model/blocks/pre_norm_decoder.h"

namespace sluice::model {

std::unique_ptr<LanguageModel> make_qwen2(const ModelFile& file) {
  return make_pre_norm_decoder(file, "qwen2", {RopeStyle::kNeox, /*require_qkv_bias=*/true, false});
}

}  // namespace sluice::model
