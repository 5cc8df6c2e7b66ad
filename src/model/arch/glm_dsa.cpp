// glm-dsa (GLM-5, GLM-5.1, GLM-5.2): deepseek2's decoder — multi-head latent attention
// (blocks/mla_attention, interleaved RoPE on the n_rot rotary dimensions, one cached latent head
// per token) and the DeepSeekMoE FFN (leading dense layers, then sigmoid-routed experts with the
// exp_probs_b selection bias plus shared experts) — with DeepSeek sparse attention: a lightning
// indexer (blocks/dsa_indexer) picks the top_k cached positions each query's MLA attention reads
// (blocks/selected_attention). attention.indexer.types marks each layer "full" (it runs its own
// indexer) or "shared" (it reuses the choice of the last full layer before it, GLM-5.2); without
// the key every layer is full, or, for a training context of 1M tokens and more, GLM-5.2's
// pattern. A full layer without indexer tensors, and the shared layers after it, attend densely
// (llama.cpp cannot run such a file). The NextN (multi-token prediction) layers at the end are
// accepted and ignored, as glm4moe's.
#include <cmath>
#include <optional>

#include "core/error.h"
#include "model/arch/architectures.h"
#include "model/blocks/deepseek_moe.h"
#include "model/blocks/dsa_indexer.h"
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
  bool full_indexer = true;                  // false: reuses the last full layer's choice
  std::optional<DsaIndexerWeights> indexer;  // a full layer's, when the file has them
  int64_t indexer_kv = -1;                   // the KV layer of its cached indexer keys
  std::vector<float> ffn_norm;               // [n_embd]
};

// The MLA geometry, as deepseek2 reads it: the cache view in attention.key_length /
// value_length (kv_lora_rank + n_rot, kv_lora_rank; head_count_kv 1), the per-head sizes in
// attention.key_length_mla / value_length_mla.
MlaShape read_mla_shape(const ArchMetadata& meta, const DecoderHParams& hp) {
  MlaShape s;
  s.n_embd = hp.n_embd;
  s.n_head = hp.n_head;
  s.q_lora_rank =
      meta.checked("attention.q_lora_rank", meta.get_int("attention.q_lora_rank"), 1, 1 << 16);
  s.kv_lora_rank =
      meta.checked("attention.kv_lora_rank", meta.get_int("attention.kv_lora_rank"), 1, 1 << 16);
  s.n_rot = hp.n_rot;
  s.head_dim_nope = meta.checked("attention.key_length_mla",
                                 meta.get_int("attention.key_length_mla"), s.n_rot + 1, 1 << 12) -
                    s.n_rot;
  s.head_dim_v = meta.checked("attention.value_length_mla",
                              meta.get_int("attention.value_length_mla"), 1, 1 << 12);
  s.norm_eps = hp.rms_eps;
  meta.checked("attention.head_count_kv", hp.n_head_kv, 1, 1);
  meta.checked("attention.key_length", hp.head_dim_k, s.kv_lora_rank + s.n_rot,
               s.kv_lora_rank + s.n_rot);
  meta.checked("attention.value_length", hp.head_dim_v, s.kv_lora_rank, s.kv_lora_rank);
  return s;
}

DsaIndexerShape read_indexer_shape(const ArchMetadata& meta, const MlaShape& mla) {
  DsaIndexerShape s;
  s.n_embd = mla.n_embd;
  s.q_lora_rank = mla.q_lora_rank;
  s.n_head = meta.checked("attention.indexer.head_count",
                          meta.get_int("attention.indexer.head_count"), 1, 1 << 10);
  s.n_rot = mla.n_rot;
  s.head_dim = meta.checked("attention.indexer.key_length",
                            meta.get_int("attention.indexer.key_length"), s.n_rot, 1 << 12);
  s.top_k =
      meta.checked("attention.indexer.top_k", meta.get_int("attention.indexer.top_k"), 1, 1 << 20);
  return s;
}

// Which layers run their own indexer: attention.indexer.types (1 full, 0 shared) or llama.cpp's
// defaults — all full before GLM-5.2 (training context under 1M), else 5.2's layout: layers 0
// and 1, then every fourth layer from 2 up to layer 77.
std::vector<bool> read_indexer_types(const ArchMetadata& meta, const DecoderHParams& hp) {
  std::vector<bool> full(size_t(hp.n_layer));
  const auto types = meta.find_per_layer("attention.indexer.types", hp.n_layer);
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const bool glm52 = il < 78 && (il < 2 || (il - 2) % 4 == 0);
    full[size_t(il)] = types ? (*types)[size_t(il)] != 0 : hp.n_ctx_train < 1048576 || glm52;
  }
  if (hp.n_layer > 0 && !full[0]) {
    fail(meta.file().display_name(), ": glm-dsa: layer 0's indexer is marked shared, but there is ",
         "no earlier full indexer layer to share with");
  }
  return full;
}

class GlmDsa final : public LanguageModel {
 public:
  explicit GlmDsa(const ModelFile& file) {
    const ArchMetadata meta(file, "glm-dsa");
    hp_ = read_decoder_hparams(meta);
    hp_.n_layer -= meta.checked("nextn_predict_layers", meta.get_int("nextn_predict_layers", 0), 0,
                                hp_.n_layer - 1);
    moe_hp_ = read_moe_hparams(meta, hp_);
    shape_ = read_mla_shape(meta, hp_);
    indexer_shape_ = read_indexer_shape(meta, shape_);
    const std::vector<bool> full_indexer = read_indexer_types(meta, hp_);
    summary_ = {"glm-dsa", hp_.n_vocab, hp_.n_embd, hp_.n_layer, hp_.n_ctx_train};

    WeightBinder binder(file);
    token_embd_ = binder.matrix("token_embd.weight", hp_.n_embd, hp_.n_vocab);
    head_ = bind_output_head(binder, token_embd_, hp_.n_embd, hp_.n_vocab);
    const RouterConfig router = deepseek_moe_router(moe_hp_, ExpertGating::kSigmoid);
    expert_layout_.files = binder.files();
    expert_layout_.layers.resize(size_t(hp_.n_layer));
    expert_layout_.n_expert_used = moe_hp_.n_expert_used;
    layers_.resize(size_t(hp_.n_layer));
    ffn_.resize(size_t(hp_.n_layer));
    int64_t n_indexer_kv = 0;
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      Layer& layer = layers_[size_t(il)];
      layer.attn_norm = binder.vector(layer_tensor(il, "attn_norm.weight"), hp_.n_embd);
      layer.attn = bind_mla_attention(binder, il, shape_);
      layer.full_indexer = full_indexer[size_t(il)];
      if (layer.full_indexer) {
        layer.indexer = bind_dsa_indexer(binder, il, indexer_shape_);
        if (layer.indexer) layer.indexer_kv = hp_.n_layer + n_indexer_kv++;
      } else {
        // llama.cpp loads a shared layer's indexer tensors, if any, but never runs them.
        for (const char* name :
             {"indexer.attn_q_b.weight", "indexer.attn_k.weight", "indexer.k_norm.weight",
              "indexer.k_norm.bias", "indexer.proj.weight"}) {
          binder.ignore(layer_tensor(il, name));
        }
      }
      layer.ffn_norm = binder.vector(layer_tensor(il, "ffn_norm.weight"), hp_.n_embd);
      ffn_[size_t(il)] =
          bind_deepseek_moe(binder, il, hp_.n_embd, hp_.n_ff, moe_hp_, router, expert_layout_);
    }
    n_indexer_kv_ = n_indexer_kv;
    binder.ignore_layers_from(hp_.n_layer);
    binder.check_all_bound();
    set_rope(meta);
  }

  const ModelSummary& summary() const override { return summary_; }

  // The MLA layers' caches, then one key cache per layer that runs an indexer.
  std::vector<KvLayerSpec> kv_layout() const override {
    std::vector<KvLayerSpec> specs(size_t(hp_.n_layer), shape_.kv_spec());
    specs.resize(size_t(hp_.n_layer + n_indexer_kv_), indexer_shape_.kv_spec());
    return specs;
  }

  const experts::ExpertLayout& expert_layout() const override { return expert_layout_; }
  // MLA, the indexer, the restricted attention and DeepSeekMoE: every step a backend op.
  bool runs_on_device() const override { return true; }
  // The indexer's choice of keys stays on the backend (top_k_positions), as does MLA's; the
  // DeepSeekMoE layers read back unless every choice stays there. Then a GPU may record the
  // decode step.
  bool decode_reads_host(const Backend& backend, const experts::ExpertSource* experts,
                         const Backend* expert_backend) const override {
    return deepseek_moe_decode_reads_host(backend, ffn_, experts, ffn_scratch_, expert_backend);
  }

  void reserve(Backend& backend, int64_t n_batch) override {
    if (!stream_.grow(backend, n_batch, hp_.n_embd)) return;
    attn_scratch_.reserve(backend, shape_, n_batch);
    indexer_scratch_.reserve(backend, indexer_shape_, n_batch);
    keys_.reserve(backend, n_batch, indexer_shape_.top_k);
    ffn_scratch_.reserve(backend, ffn_, hp_.n_embd, n_batch);
  }

  void forward(Backend& backend, const ForwardRequest& request) override {
    const int64_t n = int64_t(request.tokens.size());
    const int64_t n_embd = hp_.n_embd;
    const Trace trace{request.observer, n, &backend};
    float* x = stream_.x.data();
    backend.get_rows(token_embd_, stream_.token_ids(backend, request.tokens), n, x);
    trace("inp_embd", -1, x, n_embd);
    // The key choice the current layer attends by: its own indexer's, the last full layer's for
    // a shared layer, or none (dense attention) after a full layer without indexer weights.
    KeySelection* keys = nullptr;
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      const Layer& layer = layers_[size_t(il)];
      const DeepSeekMoeWeights& ffn = ffn_[size_t(il)];
      float* xn = stream_.xn.data();
      backend.rms_norm(x, layer.attn_norm.data(), xn, n, n_embd, hp_.rms_eps);
      trace("attn_norm", il, xn, n_embd);
      mla_project(backend, layer.attn, shape_, rope_, il, xn, n, request.sequences, attn_scratch_,
                  trace);
      if (layer.full_indexer) {
        keys = nullptr;
        if (layer.indexer) {
          dsa_indexer_select(backend, *layer.indexer, indexer_shape_, rope_, request.sequences, il,
                             layer.indexer_kv, xn, attn_scratch_.q_a.data(), n, indexer_scratch_,
                             keys_, trace);
          keys = &keys_;
        }
      }
      mla_attend(backend, shape_, kq_scale_, request.sequences, il, attn_scratch_, keys);
      mla_output(backend, layer.attn, shape_, il, n, attn_scratch_, stream_.branch.data(), trace);
      backend.add(x, stream_.branch.data(), n * n_embd);
      const bool last = il + 1 == hp_.n_layer;
      deepseek_moe_residual(backend, ffn, layer.ffn_norm,
                            {last ? nullptr : &ffn_[size_t(il + 1)],
                             last ? nullptr : &layers_[size_t(il + 1)].ffn_norm},
                            hp_.rms_eps, request.experts, il, x, xn, stream_.branch.data(), n,
                            n_embd, ffn_scratch_, trace, "ffn_norm", request.expert_backend);
    }
    const LogitRows out = logit_rows(backend, request, x, n, n_embd);
    output_logits(backend, head_, out.x, out.n_rows, hp_.rms_eps, request.logits, stream_.logits,
                  trace);
  }

 private:
  // llama.cpp's glm-dsa graph scales q·k as deepseek2's does, by mscale² / √head_dim_q with the
  // context's YaRN adjustment undone; glm-dsa reads no yarn_log_multiplier, so that term is 1.
  void set_rope(const ArchMetadata& meta) {
    const RopeScaling scaling = read_rope_scaling(meta, hp_.n_ctx_train, /*deepseek_yarn=*/false);
    rope_ = {RopeStyle::kNormal, shape_.n_rot, hp_.rope_freq_base, 1.0f, nullptr};
    apply_rope_scaling(scaling, rope_);
    const float log_scale = std::log(1.0f / scaling.freq_scale);
    const float mscale = scaling.attn_factor * std::fma(0.1f, log_scale, 1.0f);
    kq_scale_ = mscale * mscale / std::sqrt(float(shape_.head_dim_q()));
  }

  DecoderHParams hp_;
  MoeHParams moe_hp_;
  MlaShape shape_;
  DsaIndexerShape indexer_shape_;
  int64_t n_indexer_kv_ = 0;
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
  DsaIndexerScratch indexer_scratch_;
  KeySelection keys_;
  DeepSeekMoeScratch ffn_scratch_;
};

}  // namespace

std::unique_ptr<LanguageModel> make_glm_dsa(const ModelFile& file) {
  return std::make_unique<GlmDsa>(file);
}

}  // namespace sluice::model
