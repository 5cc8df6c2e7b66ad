// glm4moe (GLM-4.5, GLM-4.5-Air, GLM-4.6): a pre-norm decoder whose attention has Q/K/V
// biases, optional per-head Q/K norms and NeoX RoPE on only the first rope.dimension_count
// dimensions of each head; its FFN norm is called post_attention_norm; its FFN is DeepSeekMoE
// (leading dense layers, then sigmoid-routed experts with the exp_probs_b selection bias plus
// shared experts). The NextN (multi-token prediction) layers at the end are loaded by
// llama.cpp but never run: their tensors are accepted and ignored here.
#include <cmath>

#include "core/error.h"
#include "model/arch/architectures.h"
#include "model/blocks/deepseek_moe_decoder.h"
#include "model/hparams.h"
#include "model/rope_scaling.h"

namespace sluice::model {

std::unique_ptr<LanguageModel> make_glm4moe(const ModelFile& file) {
  const ArchMetadata meta(file, "glm4moe");
  DeepSeekMoeDecoderConfig c;
  DecoderHParams& hp = c.hp;
  hp = read_decoder_hparams(meta);
  const int64_t n_nextn = meta.checked("nextn_predict_layers",
                                       meta.get_int("nextn_predict_layers", 0), 0, hp.n_layer - 1);
  hp.n_layer -= n_nextn;
  if (auto sections = meta.find_per_layer("rope.dimension_sections", 4);
      sections && (*sections)[0] > 0 && (*sections)[1] > 0) {
    fail(file.display_name(), ": glm4moe with multimodal RoPE sections is not supported");
  }
  const MoeHParams moe_hp = read_moe_hparams(meta, hp);
  c.summary = {"glm4moe", hp.n_vocab, hp.n_embd, hp.n_layer, hp.n_ctx_train};
  const AttentionShape shape = {hp.n_embd,     hp.n_head,     hp.n_head_kv,
                                hp.head_dim_k, hp.head_dim_v, hp.rms_eps};
  if (hp.head_dim_k != hp.head_dim_v) {
    fail(file.display_name(), ": glm4moe needs key_length == value_length");
  }
  AttentionLayerConfig config;
  config.rope = {RopeStyle::kNeox, hp.n_rot, hp.rope_freq_base, 1.0f, nullptr};
  apply_rope_scaling(read_rope_scaling(meta, hp.n_ctx_train, /*deepseek_yarn=*/false), config.rope);
  config.scale = 1.0f / std::sqrt(float(hp.head_dim_k));

  WeightBinder binder(file);
  c.token_embd = binder.matrix("token_embd.weight", hp.n_embd, hp.n_vocab);
  c.head = bind_output_head(binder, c.token_embd, hp.n_embd, hp.n_vocab);
  const RouterConfig router = deepseek_moe_router(moe_hp, ExpertGating::kSigmoid);
  c.expert_layout.files = binder.files();
  c.expert_layout.layers.resize(size_t(hp.n_layer));
  c.expert_layout.n_expert_used = moe_hp.n_expert_used;
  c.layers.resize(size_t(hp.n_layer));
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    DeepSeekMoeDecoderLayer& layer = c.layers[size_t(il)];
    layer.attn_norm = binder.vector(layer_tensor(il, "attn_norm.weight"), hp.n_embd);
    layer.shape = shape;
    layer.attn = bind_attention(binder, il, shape, /*with_gate=*/false);
    layer.config = config;
    layer.ffn_norm = binder.vector(layer_tensor(il, "post_attention_norm.weight"), hp.n_embd);
    c.ffn.push_back(
        bind_deepseek_moe(binder, il, hp.n_embd, hp.n_ff, moe_hp, router, c.expert_layout));
  }
  binder.ignore_layers_from(hp.n_layer);
  binder.check_all_bound();
  c.ffn_norm_trace = "post_attn_norm";
  c.runs_on_device = true;  // ordinary attention and DeepSeekMoE: every step a backend op
  return make_deepseek_moe_decoder(std::move(c));
}

}  // namespace sluice::model
