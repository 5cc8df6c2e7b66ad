// deepseek2 (DeepSeek V2, V2 Lite, V3, R1): a pre-norm decoder with multi-head latent
// attention (blocks/mla_attention: interleaved RoPE on the n_rot rotary dimensions, one cached
// latent head per token) and the DeepSeekMoE FFN (leading dense layers, then experts routed by
// softmax or — V3 — sigmoid with the exp_probs_b selection bias and group-limited selection,
// weights scaled, plus shared experts). YaRN RoPE with DeepSeek's attention-scale correction.
#include <cmath>

#include "core/error.h"
#include "model/arch/architectures.h"
#include "model/blocks/deepseek_moe.h"
#include "model/blocks/mla_attention.h"
#include "model/blocks/output_head.h"
#include "model/blocks/residual_stream.h"
#include "model/hparams.h"
#include "model/rope_scaling.h"

namespace sluice::model {
namespace {

struct Layer {
  std::vector<float> attn_norm;  // [n_embd]
  MlaWeights attn;
  std::vector<float> ffn_norm;  // [n_embd]
};

// The MLA geometry. GGUF's MLA form stores the cache view in attention.key_length /
// value_length (kv_lora_rank + n_rot, kv_lora_rank; head_count_kv 1) and the per-head sizes in
// attention.key_length_mla / value_length_mla.
MlaShape read_mla_shape(const ArchMetadata& meta, const DecoderHParams& hp) {
  MlaShape s;
  s.n_embd = hp.n_embd;
  s.n_head = hp.n_head;
  s.q_lora_rank =
      meta.checked("attention.q_lora_rank", meta.get_int("attention.q_lora_rank", 0), 0, 1 << 16);
  s.kv_lora_rank =
      meta.checked("attention.kv_lora_rank", meta.get_int("attention.kv_lora_rank"), 1, 1 << 16);
  s.n_rot = hp.n_rot;
  const auto key_length_mla = meta.find_int("attention.key_length_mla");
  const auto value_length_mla = meta.find_int("attention.value_length_mla");
  if (!key_length_mla || !value_length_mla) {
    fail(meta.file().display_name(),
         ": deepseek2 without attention.key_length_mla / value_length_mla (the older combined "
         "attn_kv_b form) is not supported; convert the model again");
  }
  s.head_dim_nope =
      meta.checked("attention.key_length_mla", *key_length_mla, s.n_rot + 1, 1 << 12) - s.n_rot;
  s.head_dim_v = meta.checked("attention.value_length_mla", *value_length_mla, 1, 1 << 12);
  s.norm_eps = hp.rms_eps;
  meta.checked("attention.head_count_kv", hp.n_head_kv, 1, 1);
  meta.checked("attention.key_length", hp.head_dim_k, s.kv_lora_rank + s.n_rot,
               s.kv_lora_rank + s.n_rot);
  meta.checked("attention.value_length", hp.head_dim_v, s.kv_lora_rank, s.kv_lora_rank);
  return s;
}

class DeepSeek2 final : public LanguageModel {
 public:
  explicit DeepSeek2(const ModelFile& file) {
    const ArchMetadata meta(file, "deepseek2");
    hp_ = read_decoder_hparams(meta);
    // llama.cpp's default gating when expert_gating_func is absent: softmax (DeepSeek V2 files),
    // except for GLM-4.7-Flash, which it recognises by 47 or 48 layers and 154880 tokens.
    const bool glm47_flash = (hp_.n_layer == 47 || hp_.n_layer == 48) && hp_.n_vocab == 154880;
    hp_.n_layer -= meta.checked("nextn_predict_layers", meta.get_int("nextn_predict_layers", 0), 0,
                                hp_.n_layer - 1);
    moe_hp_ = read_moe_hparams(meta, hp_);
    shape_ = read_mla_shape(meta, hp_);
    summary_ = {"deepseek2", hp_.n_vocab, hp_.n_embd, hp_.n_layer, hp_.n_ctx_train};

    WeightBinder binder(file);
    token_embd_ = binder.matrix("token_embd.weight", hp_.n_embd, hp_.n_vocab);
    head_ = bind_output_head(binder, token_embd_, hp_.n_embd, hp_.n_vocab);
    const RouterConfig router =
        deepseek_moe_router(moe_hp_, glm47_flash ? ExpertGating::kSigmoid : ExpertGating::kSoftmax);
    expert_layout_.files = binder.files();
    expert_layout_.layers.resize(size_t(hp_.n_layer));
    expert_layout_.n_expert_used = moe_hp_.n_expert_used;
    layers_.resize(size_t(hp_.n_layer));
    ffn_.resize(size_t(hp_.n_layer));
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      Layer& layer = layers_[size_t(il)];
      layer.attn_norm = binder.vector(layer_tensor(il, "attn_norm.weight"), hp_.n_embd);
      layer.attn = bind_mla_attention(binder, il, shape_);
      layer.ffn_norm = binder.vector(layer_tensor(il, "ffn_norm.weight"), hp_.n_embd);
      ffn_[size_t(il)] =
          bind_deepseek_moe(binder, il, hp_.n_embd, hp_.n_ff, moe_hp_, router, expert_layout_);
    }
    binder.ignore_layers_from(hp_.n_layer);
    binder.check_all_bound();
    set_rope(meta);
  }

  const ModelSummary& summary() const override { return summary_; }

  std::vector<KvLayerSpec> kv_layout() const override {
    return std::vector<KvLayerSpec>(size_t(hp_.n_layer), shape_.kv_spec());
  }

  const experts::ExpertLayout& expert_layout() const override { return expert_layout_; }
  // MLA and DeepSeekMoE: every step a backend op.
  bool runs_on_device() const override { return true; }
  // MLA reads nothing back; the DeepSeekMoE layers do unless every choice stays on the backend
  // (softmax and sigmoid routers both choose there). Then a GPU may record the decode step.
  bool decode_reads_host(const Backend& backend, const experts::ExpertSource* experts,
                         const Backend* expert_backend) const override {
    return deepseek_moe_decode_reads_host(backend, ffn_, experts, ffn_scratch_, expert_backend);
  }

  void reserve(Backend& backend, int64_t n_batch) override {
    if (!stream_.grow(backend, n_batch, hp_.n_embd)) return;
    attn_scratch_.reserve(backend, shape_, n_batch);
    ffn_scratch_.reserve(backend, ffn_, hp_.n_embd, n_batch);
  }

  void forward(Backend& backend, const ForwardRequest& request) override {
    const int64_t n = int64_t(request.tokens.size());
    const int64_t n_embd = hp_.n_embd;
    const Trace trace{request.observer, n, &backend};
    float* x = stream_.x.data();
    backend.get_rows(token_embd_, stream_.token_ids(backend, request.tokens), n, x);
    trace("inp_embd", -1, x, n_embd);
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      const Layer& layer = layers_[size_t(il)];
      const DeepSeekMoeWeights& ffn = ffn_[size_t(il)];
      backend.rms_norm(x, layer.attn_norm.data(), stream_.xn.data(), n, n_embd, hp_.rms_eps);
      trace("attn_norm", il, stream_.xn.data(), n_embd);
      mla_attention(backend, layer.attn, shape_, rope_, kq_scale_, request.sequences, il,
                    stream_.xn.data(), n, attn_scratch_, stream_.branch.data(), trace);
      backend.add(x, stream_.branch.data(), n * n_embd);
      const bool last = il + 1 == hp_.n_layer;
      deepseek_moe_residual(backend, ffn, layer.ffn_norm,
                            {last ? nullptr : &ffn_[size_t(il + 1)],
                             last ? nullptr : &layers_[size_t(il + 1)].ffn_norm},
                            hp_.rms_eps, request.experts, il, x, stream_.xn.data(),
                            stream_.branch.data(), n, n_embd, ffn_scratch_, trace, "ffn_norm",
                            request.expert_backend);
    }
    const LogitRows out = logit_rows(backend, request, x, n, n_embd);
    output_logits(backend, head_, out.x, out.n_rows, hp_.rms_eps, request.logits, stream_.logits,
                  trace);
  }

 private:
  // llama.cpp's deepseek2 graph: RoPE gets the context's YaRN attention factor; the scores are
  // pre-scaled by mscale² instead, mscale = (1 + 0.1 · log_mul · ln(1/freq_scale)) times the
  // attention factor with the context's own YaRN adjustment undone.
  void set_rope(const ArchMetadata& meta) {
    const RopeScaling scaling = read_rope_scaling(meta, hp_.n_ctx_train, /*deepseek_yarn=*/true);
    rope_ = {RopeStyle::kNormal, shape_.n_rot, hp_.rope_freq_base, 1.0f, nullptr};
    apply_rope_scaling(scaling, rope_);
    const float log_scale = std::log(1.0f / scaling.freq_scale);
    const float attn_factor = scaling.attn_factor * std::fma(0.1f, log_scale, 1.0f);
    const float mscale = attn_factor * std::fma(0.1f * scaling.yarn_log_mul, log_scale, 1.0f);
    kq_scale_ = mscale * mscale / std::sqrt(float(shape_.head_dim_q()));
  }

  DecoderHParams hp_;
  MoeHParams moe_hp_;
  MlaShape shape_;
  experts::ExpertLayout expert_layout_;
  ModelSummary summary_;
  RopeConfig rope_;
  float kq_scale_ = 1.0f;
  MatrixView token_embd_;  // [n_embd, n_vocab]
  OutputHead head_;
  std::vector<Layer> layers_;
  std::vector<DeepSeekMoeWeights> ffn_;  // [n_layer]

  ResidualStream stream_;
  MlaScratch attn_scratch_;
  DeepSeekMoeScratch ffn_scratch_;
};

}  // namespace

std::unique_ptr<LanguageModel> make_deepseek2(const ModelFile& file) {
  return std::make_unique<DeepSeek2>(file);
}

}  // namespace sluice::model
