// llama (Llama 2/3, SmolLM2, Mistral-style): the pre-norm decoder with SwiGLU and RoPE on
// adjacent pairs — llama.cpp's converter permutes Q/K rows so that "normal" RoPE here equals
// Hugging Face's rotate_half; a snapshot read directly keeps HF's rows and rotates NeoX-style.
// Optional Q/K/V/O biases and Llama 3.1 rope_freqs are accepted.
#include "model/arch/architectures.h"
#include "model/blocks/pre_norm_decoder.h"
#include "model/hf_snapshot.h"

namespace sluice::model {

std::unique_ptr<LanguageModel> make_llama(const ModelFile& file) {
  const RopeStyle style = file.contains(kHfRopeRotateHalf) ? RopeStyle::kNeox : RopeStyle::kNormal;
  return make_pre_norm_decoder(file, "llama", {style, false, false});
}

}  // namespace sluice::model
