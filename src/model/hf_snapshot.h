// The Hugging Face snapshot translator: a safetensors ModelFile whose folder holds config.json
// (llama, qwen2, qwen3, gemma3_text, gemma3's text_config; MoE: qwen3_moe, mixtral, olmoe,
// glm4_moe, deepseek_v3) becomes a ModelFile with the GGUF metadata and tensor names the
// architectures read, over the same bytes (HF's row-major [out, in] is GGUF's ne [in, out]; only
// deepseek's per-head K up-projection is transposed, at bind). Where the two conventions differ
// in the numbers, it says so with the sluice.hf.* keys below.
#pragma once

#include <optional>
#include <string_view>

#include "format/model_file.h"

namespace sluice::model {

// Set (bool true) only by the translator; the architecture files act on them:
// Q/K rows are in Hugging Face's order, whose rotate_half pairs dimension i with i + n_rot/2.
// llama.cpp's converter permutes llama's rows so that adjacent pairs rotate instead, so
// arch/llama.cpp rotates NeoX-style when this is set.
inline constexpr std::string_view kHfRopeRotateHalf = "sluice.hf.rope_rotate_half";
// RMS-norm weights are stored as w where the model multiplies by (1 + w); llama.cpp's converter
// bakes the 1 in, so arch/gemma3.cpp adds it at load when this is set.
inline constexpr std::string_view kHfNormPlusOne = "sluice.hf.norm_plus_one";
// float32 [n_rot / 2]: the RoPE frequency divisors of Llama 3.1's "llama3" scaling, which a GGUF
// carries as the tensor rope_freqs.weight (llama.cpp's converter computes it the same way);
// the decoder reads either.
inline constexpr std::string_view kHfRopeFreqFactors = "sluice.hf.rope_freq_factors";
// Some weights are FP8 with block scales (which the view drops): only `sluice convert` reads
// such a snapshot (runtime/hf_convert_fp8.h); loading it to run is refused.
inline constexpr std::string_view kHfFp8BlockScaled = "sluice.hf.fp8_block_scaled";

// The GGUF name, within its layer, of a Hugging Face layer tensor of the standard attention —
// input_layernorm and the q/k/v/o projections' weights and biases — or nullopt. The translator
// and the converters of families that name their attention so (gpt-oss) share it.
std::optional<std::string_view> hf_attention_tensor(std::string_view rest);

// A safetensors file without general.architecture: a snapshot to translate.
bool is_hf_snapshot(const ModelFile& file);

// Reads config.json beside the first safetensors file and returns the translated catalogue.
// Refuses, naming the key or tensor: an unknown model_type, a setting the architecture cannot
// honour (a RoPE scaling type, soft-capping, a query scale), and tensors it cannot name.
ModelFile gguf_view_of_hf_snapshot(const ModelFile& file);

}  // namespace sluice::model
