// qwen3 (Qwen3 dense): the pre-norm decoder with per-head RMS norms on Q and K before NeoX-style
// RoPE, and no biases.
#include "model/arch/architectures.h"
#include "model/blocks/pre_norm_decoder.h"

namespace sluice::model {

std::unique_ptr<LanguageModel> make_qwen3(const ModelFile& file) {
  return make_pre_norm_decoder(file, "qwen3", {RopeStyle::kNeox, false, /*require_qk_norm=*/true});
}

}  // namespace sluice::model
