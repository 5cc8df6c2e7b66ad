// llama (Llama 2/3, SmolLM2, Mistral-style): the pre-norm decoder with SwiGLU and RoPE on
// adjacent pairs — llama.cpp's converter permutes Q/K rows so that "normal" RoPE here equals
// Hugging Face's rotate_half; a snapshot read directly keeps HF's rows and rotates NeoX-style.
// Optional Q/K/V/O biases and Llama 3.1 rope_freqs are accepted. Mixtral-style files (a router
// blk.N.ffn_gate_inp per layer) have MoE FFNs: softmax, top-k, weights renormalised.
#include "model/arch/architectures.h"
#include "model/blocks/pre_norm_decoder.h"
#include "model/hf_snapshot.h"

namespace sluice::model {

std::unique_ptr<LanguageModel> make_llama(const ModelFile& file) {
  const RopeStyle style = file.contains(kHfRopeRotateHalf) ? RopeStyle::kNeox : RopeStyle::kNormal;
  PreNormDecoderOptions options;
  options.rope_style = style;
  options.moe = MoeUse::kWhenPresent;
  options.moe_norm_weights = true;
  return make_pre_norm_decoder(file, "llama", options);
}

}  // namespace sluice::model
