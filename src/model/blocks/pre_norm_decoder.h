// PreNormDecoder: the decoder of the llama family and its close relatives (qwen2, qwen3,
// Mistral-style): x += attn(rms_norm(x)); x += ffn(rms_norm(x)), with SwiGLU, optional Q/K/V
// biases and optional per-head Q/K norms, which the binder finds in the file. The architecture
// files (arch/llama.cpp, arch/qwen2.cpp, arch/qwen3.cpp) read their hyper-parameters and say
// which RoPE style and which optional tensors they require.
#pragma once

#include <memory>

#include "model/blocks/attention.h"
#include "model/blocks/ffn.h"
#include "model/blocks/output_head.h"
#include "model/hparams.h"
#include "model/language_model.h"

namespace sluice::model {

struct PreNormDecoderOptions {
  RopeStyle rope_style = RopeStyle::kNormal;
  bool require_qkv_bias = false;  // qwen2: attn_{q,k,v}.bias must be present
  bool require_qk_norm = false;   // qwen3: attn_{q,k}_norm must be present
};

std::unique_ptr<LanguageModel> make_pre_norm_decoder(const ModelFile& file, const std::string& arch,
                                                     const PreNormDecoderOptions& options);

}  // namespace sluice::model
