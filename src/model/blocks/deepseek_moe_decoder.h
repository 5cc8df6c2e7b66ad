// DeepSeekMoeDecoder: the pre-norm decoder of the families whose attention is the ordinary
// block and whose FFN is DeepSeekMoE (glm4moe, laguna): per layer x += attn(attn_norm(x)), then
// x += ffn(ffn_norm(x)) with the next layer's experts guessed while this layer's load. The
// architecture file binds the weights and settles every per-layer choice (head count, RoPE,
// window, output gate); this runs them.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "experts/expert_layout.h"
#include "model/blocks/attention.h"
#include "model/blocks/deepseek_moe.h"
#include "model/blocks/output_head.h"
#include "model/hparams.h"
#include "model/language_model.h"

namespace sluice::model {

struct DeepSeekMoeDecoderLayer {
  std::vector<float> attn_norm;  // [n_embd]
  AttentionShape shape;
  AttentionWeights attn;
  AttentionLayerConfig config;
  std::vector<float> ffn_norm;  // [n_embd]
};

struct DeepSeekMoeDecoderConfig {
  ModelSummary summary;
  DecoderHParams hp;
  MatrixView token_embd;  // [n_embd, n_vocab]
  OutputHead head;
  experts::ExpertLayout expert_layout;
  std::vector<DeepSeekMoeDecoderLayer> layers;
  std::vector<DeepSeekMoeWeights> ffn;      // [n_layer]
  const char* ffn_norm_trace = "ffn_norm";  // llama.cpp's name for the normed FFN input
  // Whether every step of the family's layers is a backend op (LanguageModel::runs_on_device).
  bool runs_on_device = false;
  // Observer names replaced as llama.cpp's graph of this family names them (from, to).
  std::vector<std::pair<std::string, std::string>> trace_renames;
};

std::unique_ptr<LanguageModel> make_deepseek_moe_decoder(DeepSeekMoeDecoderConfig config);

}  // namespace sluice::model
