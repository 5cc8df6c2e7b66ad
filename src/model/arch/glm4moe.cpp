// glm4moe (GLM-4.5, GLM-4.5-Air, GLM-4.6): a pre-norm decoder whose attention has Q/K/V
// biases, optional per-head Q/K norms and NeoX RoPE on only the first rope.dimension_count
// dimensions of each head; its FFN norm is called post_attention_norm; its FFN is DeepSeekMoE
// (leading dense layers, then sigmoid-routed experts with the exp_probs_b selection bias plus
// shared experts). The NextN (multi-token prediction) layers at the end are loaded by
// llama.cpp but never run: their tensors are accepted and ignored here.
#include <cmath>

#include "core/error.h"
#include "model/arch/architectures.h"
#include "model/blocks/attention.h"
#include "model/blocks/deepseek_moe.h"
#include "model/blocks/output_head.h"
#include "model/blocks/residual_stream.h"
#include "model/hparams.h"
#include "model/rope_scaling.h"

namespace sluice::model {
namespace {

struct Layer {
  std::vector<float> attn_norm;  // [n_embd]
  AttentionWeights attn;
  std::vector<float> ffn_norm;  // [n_embd] blk.N.post_attention_norm
};

class Glm4Moe final : public LanguageModel {
 public:
  explicit Glm4Moe(const ModelFile& file) {
    const ArchMetadata meta(file, "glm4moe");
    hp_ = read_decoder_hparams(meta);
    const int64_t n_nextn = meta.checked(
        "nextn_predict_layers", meta.get_int("nextn_predict_layers", 0), 0, hp_.n_layer - 1);
    hp_.n_layer -= n_nextn;
    if (auto sections = meta.find_per_layer("rope.dimension_sections", 4);
        sections && (*sections)[0] > 0 && (*sections)[1] > 0) {
      fail(file.display_name(), ": glm4moe with multimodal RoPE sections is not supported");
    }
    moe_hp_ = read_moe_hparams(meta, hp_);
    summary_ = {"glm4moe", hp_.n_vocab, hp_.n_embd, hp_.n_layer, hp_.n_ctx_train};
    shape_ = {hp_.n_embd, hp_.n_head, hp_.n_head_kv, hp_.head_dim_k, hp_.head_dim_v, hp_.rms_eps};
    if (hp_.head_dim_k != hp_.head_dim_v) {
      fail(file.display_name(), ": glm4moe needs key_length == value_length");
    }

    WeightBinder binder(file);
    token_embd_ = binder.matrix("token_embd.weight", hp_.n_embd, hp_.n_vocab);
    head_ = bind_output_head(binder, token_embd_, hp_.n_embd, hp_.n_vocab);
    const RouterConfig router = deepseek_moe_router(moe_hp_, ExpertGating::kSigmoid);
    expert_layout_.files = binder.files();
    expert_layout_.layers.resize(size_t(hp_.n_layer));
    expert_layout_.n_expert_used = moe_hp_.n_expert_used;
    layers_.resize(size_t(hp_.n_layer));
    ffn_.resize(size_t(hp_.n_layer));
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      Layer& layer = layers_[size_t(il)];
      layer.attn_norm = binder.vector(layer_tensor(il, "attn_norm.weight"), hp_.n_embd);
      layer.attn = bind_attention(binder, il, shape_, /*with_gate=*/false);
      layer.ffn_norm = binder.vector(layer_tensor(il, "post_attention_norm.weight"), hp_.n_embd);
      ffn_[size_t(il)] =
          bind_deepseek_moe(binder, il, hp_.n_embd, hp_.n_ff, moe_hp_, router, expert_layout_);
    }
    binder.ignore_layers_from(hp_.n_layer);
    binder.check_all_bound();

    config_.rope = {RopeStyle::kNeox, hp_.n_rot, hp_.rope_freq_base, 1.0f, nullptr};
    apply_rope_scaling(read_rope_scaling(meta, hp_.n_ctx_train, /*deepseek_yarn=*/false),
                       config_.rope);
    config_.scale = 1.0f / std::sqrt(float(hp_.head_dim_k));
  }

  const ModelSummary& summary() const override { return summary_; }

  std::vector<KvLayerSpec> kv_layout() const override {
    return std::vector<KvLayerSpec>(size_t(hp_.n_layer),
                                    {hp_.n_head_kv, hp_.head_dim_k, hp_.head_dim_v, 0});
  }

  const experts::ExpertLayout& expert_layout() const override { return expert_layout_; }

  void reserve(int64_t n_batch) override {
    if (!stream_.grow(n_batch, hp_.n_embd)) return;
    attn_scratch_.reserve(shape_, n_batch);
    ffn_scratch_.reserve(ffn_, hp_.n_embd, n_batch);
  }

  void forward(Backend& backend, const ForwardRequest& request) override {
    const int64_t n = int64_t(request.tokens.size());
    const int64_t n_embd = hp_.n_embd;
    const Trace trace{request.observer, n};
    float* x = stream_.x.data();
    backend.get_rows(token_embd_, request.tokens.data(), n, x);
    trace("inp_embd", -1, x, n_embd);
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      const Layer& layer = layers_[size_t(il)];
      const DeepSeekMoeWeights& ffn = ffn_[size_t(il)];
      backend.rms_norm(x, layer.attn_norm.data(), stream_.xn.data(), n, n_embd, hp_.rms_eps);
      trace("attn_norm", il, stream_.xn.data(), n_embd);
      self_attention(backend, layer.attn, shape_, config_, request.sequences, il, stream_.xn.data(),
                     n, attn_scratch_, stream_.branch.data(), trace);
      backend.add(x, stream_.branch.data(), n * n_embd);
      trace("ffn_inp", il, x, n_embd);
      backend.rms_norm(x, layer.ffn_norm.data(), stream_.xn.data(), n, n_embd, hp_.rms_eps);
      trace("post_attn_norm", il, stream_.xn.data(), n_embd);
      deepseek_moe_route(backend, ffn, request.experts, il, stream_.xn.data(), n, ffn_scratch_,
                         trace);
      if (il + 1 < hp_.n_layer) {
        deepseek_moe_prefetch(backend, ffn_[size_t(il + 1)], layers_[size_t(il + 1)].ffn_norm,
                              hp_.rms_eps, request.experts, il + 1, x, n, n_embd, ffn_scratch_);
      }
      deepseek_moe_compute(backend, ffn, request.experts, il, stream_.xn.data(), n, n_embd,
                           ffn_scratch_, stream_.branch.data(), trace);
      backend.add(x, stream_.branch.data(), n * n_embd);
      trace("l_out", il, x, n_embd);
    }
    const LogitRows out = logit_rows(request, x, n, n_embd);
    output_logits(backend, head_, out.x, out.n_rows, hp_.rms_eps, request.logits, trace);
  }

 private:
  DecoderHParams hp_;
  MoeHParams moe_hp_;
  experts::ExpertLayout expert_layout_;
  ModelSummary summary_;
  AttentionShape shape_;
  AttentionLayerConfig config_;
  MatrixView token_embd_;  // [n_embd, n_vocab]
  OutputHead head_;
  std::vector<Layer> layers_;
  std::vector<DeepSeekMoeWeights> ffn_;  // [n_layer]

  ResidualStream stream_;
  AttentionScratch attn_scratch_;
  DeepSeekMoeScratch ffn_scratch_;
};

}  // namespace

std::unique_ptr<LanguageModel> make_glm4moe(const ModelFile& file) {
  return std::make_unique<Glm4Moe>(file);
}

}  // namespace sluice::model
