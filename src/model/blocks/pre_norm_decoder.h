// PreNormDecoder: the decoder of the llama family and its close relatives (qwen2, qwen3,
// Mistral-style, and the MoE ones: Mixtral, qwen3moe, olmoe): x += attn(rms_norm(x));
// x += ffn(rms_norm(x)), the FFN a SwiGLU or a Mixture of Experts, with optional Q/K/V biases
// and optional Q/K norms, which the binder finds in the file. The architecture files (arch/*)
// say which RoPE style, which optional tensors and which kind of FFN they require.
#pragma once

#include <memory>

#include "model/blocks/attention.h"
#include "model/blocks/ffn.h"
#include "model/blocks/moe_ffn.h"
#include "model/blocks/output_head.h"
#include "model/hparams.h"
#include "model/language_model.h"

namespace sluice::model {

enum class MoeUse : uint8_t {
  kNone,         // every layer has a dense FFN
  kWhenPresent,  // a layer with blk.N.ffn_gate_inp is MoE (llama: Mixtral files)
  kRequired,     // every layer is MoE (qwen3moe, olmoe)
};

struct PreNormDecoderOptions {
  RopeStyle rope_style = RopeStyle::kNormal;
  bool require_qkv_bias = false;      // qwen2: attn_{q,k,v}.bias must be present
  bool require_qk_norm = false;       // qwen3: attn_{q,k}_norm must be present
  bool qk_norm_across_heads = false;  // olmoe: one Q norm over all heads
  MoeUse moe = MoeUse::kNone;
  bool moe_norm_weights = true;  // when the file has no expert_weights_norm
};

std::unique_ptr<LanguageModel> make_pre_norm_decoder(const ModelFile& file, const std::string& arch,
                                                     const PreNormDecoderOptions& options);

}  // namespace sluice::model
