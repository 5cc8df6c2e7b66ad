// kimi-linear (Kimi Linear, e.g. 48B-A3B): a pre-norm decoder whose layers with head_count_kv 0
// are Kimi delta attention (blocks/kimi_delta_attention, recurrent) and the others multi-head
// latent attention (blocks/mla_attention) without any RoPE — the "rope" part of the cached key
// and of the queries is used as it is, as llama.cpp's graph does; scores scaled by
// 1/sqrt(key_length_mla). The FFN is DeepSeekMoE (blocks/deepseek_moe): leading dense layers,
// then experts routed by the file's gating (sigmoid + exp_probs_b), weights always renormalised
// and scaled by expert_weights_scale, plus the shared expert.
#include <cmath>

#include "core/error.h"
#include "model/arch/architectures.h"
#include "model/blocks/deepseek_moe.h"
#include "model/blocks/kimi_delta_attention.h"
#include "model/blocks/mla_attention.h"
#include "model/blocks/output_head.h"
#include "model/blocks/residual_stream.h"
#include "model/hparams.h"

namespace sluice::model {
namespace {

constexpr int64_t kMaxDim = int64_t(1) << 20;

struct Layer {
  bool recurrent = false;        // KDA; otherwise MLA
  std::vector<float> attn_norm;  // [n_embd]
  KdaWeights kda;
  MlaWeights mla;
  std::vector<float> ffn_norm;  // [n_embd]
};

// The shared keys, read here because head_count_kv is a per-layer array (0: a KDA layer), which
// read_decoder_hparams refuses.
DecoderHParams read_kimi_hparams(const ArchMetadata& meta) {
  DecoderHParams hp;
  hp.n_embd = meta.checked("embedding_length", meta.get_int("embedding_length"), 1, kMaxDim);
  hp.n_layer = meta.checked("block_count", meta.get_int("block_count"), 1, 4096);
  hp.n_ff = meta.checked("feed_forward_length", meta.get_int("feed_forward_length"), 1, kMaxDim);
  hp.n_head = meta.checked("attention.head_count", meta.get_int("attention.head_count"), 1, 4096);
  hp.head_dim_k = meta.get_int("attention.key_length");
  hp.head_dim_v = meta.get_int("attention.value_length");
  hp.n_ctx_train =
      meta.checked("context_length", meta.get_int("context_length", 4096), 1, int64_t(1) << 30);
  hp.n_rot =
      meta.checked("rope.dimension_count", meta.get_int("rope.dimension_count"), 0, hp.head_dim_k);
  hp.rms_eps = meta.get_float("attention.layer_norm_rms_epsilon", 1e-5f);
  hp.n_vocab =
      meta.find_int("vocab_size").value_or(int64_t(meta.file().tensor("token_embd.weight").ne[1]));
  meta.checked("vocab_size", hp.n_vocab, 1, int64_t(1) << 24);
  return hp;
}

// MLA's geometry as deepseek2's GGUF form gives it: the cache view in key_length / value_length
// (kv_lora_rank + n_rot, kv_lora_rank), the per-head sizes in key_length_mla / value_length_mla.
MlaShape read_mla_shape(const ArchMetadata& meta, const DecoderHParams& hp) {
  MlaShape s;
  s.n_embd = hp.n_embd;
  s.n_head = hp.n_head;
  s.q_lora_rank =
      meta.checked("attention.q_lora_rank", meta.get_int("attention.q_lora_rank", 0), 0, 1 << 16);
  s.kv_lora_rank =
      meta.checked("attention.kv_lora_rank", meta.get_int("attention.kv_lora_rank"), 1, 1 << 16);
  s.n_rot = hp.n_rot;
  s.head_dim_nope = meta.checked("attention.key_length_mla",
                                 meta.get_int("attention.key_length_mla"), s.n_rot + 1, 1 << 12) -
                    s.n_rot;
  s.head_dim_v = meta.checked("attention.value_length_mla",
                              meta.get_int("attention.value_length_mla"), 1, 1 << 12);
  s.norm_eps = hp.rms_eps;
  meta.checked("attention.key_length", hp.head_dim_k, s.kv_lora_rank + s.n_rot,
               s.kv_lora_rank + s.n_rot);
  meta.checked("attention.value_length", hp.head_dim_v, s.kv_lora_rank, s.kv_lora_rank);
  return s;
}

KdaShape read_kda_shape(const ArchMetadata& meta, const DecoderHParams& hp) {
  KdaShape s;
  s.n_embd = hp.n_embd;
  s.n_head = hp.n_head;
  s.head_dim = meta.checked("kda.head_dim", meta.get_int("kda.head_dim"), 1, 1024);
  s.conv_kernel = meta.checked("ssm.conv_kernel", meta.get_int("ssm.conv_kernel"), 2, 64);
  s.norm_eps = hp.rms_eps;
  return s;
}

class KimiLinear final : public LanguageModel {
 public:
  explicit KimiLinear(const ModelFile& file) {
    const ArchMetadata meta(file, "kimi-linear");
    hp_ = read_kimi_hparams(meta);
    const std::vector<int64_t> head_count_kv =
        meta.get_per_layer("attention.head_count_kv", hp_.n_layer);
    if (meta.find_int("attn_res_block_size").value_or(0) > 0) {
      fail(file.display_name(), ": kimi-linear with attention residuals is not supported");
    }
    moe_hp_ = read_moe_hparams(meta, hp_);
    mla_shape_ = read_mla_shape(meta, hp_);
    kda_shape_ = read_kda_shape(meta, hp_);
    summary_ = {"kimi-linear", hp_.n_vocab, hp_.n_embd, hp_.n_layer, hp_.n_ctx_train};

    WeightBinder binder(file);
    token_embd_ = binder.matrix("token_embd.weight", hp_.n_embd, hp_.n_vocab);
    head_ = bind_output_head(binder, token_embd_, hp_.n_embd, hp_.n_vocab);
    // llama.cpp renormalises the chosen experts' weights for this family, whatever the file says.
    RouterConfig router = deepseek_moe_router(moe_hp_, ExpertGating::kSigmoid);
    router.norm_weights = true;
    expert_layout_.files = binder.files();
    expert_layout_.layers.resize(size_t(hp_.n_layer));
    expert_layout_.n_expert_used = moe_hp_.n_expert_used;
    layers_.resize(size_t(hp_.n_layer));
    ffn_.resize(size_t(hp_.n_layer));
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      Layer& layer = layers_[size_t(il)];
      const int64_t n_head_kv = head_count_kv[size_t(il)];
      layer.recurrent = n_head_kv == 0;
      layer.attn_norm = binder.vector(layer_tensor(il, "attn_norm.weight"), hp_.n_embd);
      if (layer.recurrent) {
        layer.kda = bind_kimi_delta_attention(binder, il, kda_shape_);
      } else {
        layer.mla = bind_mla_attention(binder, il, mla_shape_);
      }
      layer.ffn_norm = binder.vector(layer_tensor(il, "ffn_norm.weight"), hp_.n_embd);
      ffn_[size_t(il)] =
          bind_deepseek_moe(binder, il, hp_.n_embd, hp_.n_ff, moe_hp_, router, expert_layout_);
    }
    binder.check_all_bound();
    kq_scale_ = 1.0f / std::sqrt(float(mla_shape_.head_dim_q()));
  }

  const ModelSummary& summary() const override { return summary_; }
  // KDA, MLA and DeepSeekMoE are backend ops throughout.
  bool runs_on_device() const override { return true; }
  // KDA's recurrent state and MLA read nothing back; the DeepSeekMoE layers do unless every
  // choice stays on the backend. Then a GPU may record the decode step.
  bool decode_reads_host(const Backend& backend, const experts::ExpertSource* experts,
                         const Backend* expert_backend) const override {
    return deepseek_moe_decode_reads_host(backend, ffn_, experts, ffn_scratch_, expert_backend);
  }

  std::vector<KvLayerSpec> kv_layout() const override {
    std::vector<KvLayerSpec> specs;
    for (const Layer& l : layers_) {
      specs.push_back(l.recurrent ? kda_shape_.cache_spec() : mla_shape_.kv_spec());
    }
    return specs;
  }

  const experts::ExpertLayout& expert_layout() const override { return expert_layout_; }

  void reserve(Backend& backend, int64_t n_batch) override {
    if (!stream_.grow(backend, n_batch, hp_.n_embd)) return;
    mla_scratch_.reserve(backend, mla_shape_, n_batch);
    kda_scratch_.reserve(backend, kda_shape_, n_batch);
    ffn_scratch_.reserve(backend, ffn_, hp_.n_embd, n_batch);
  }

  void forward(Backend& backend, const ForwardRequest& request) override {
    const int64_t n = int64_t(request.tokens.size());
    const int64_t n_embd = hp_.n_embd;
    const Trace trace{request.observer, n, &backend};
    float* x = stream_.x.data();
    float* xn = stream_.xn.data();
    float* branch = stream_.branch.data();
    backend.get_rows(token_embd_, stream_.token_ids(backend, request.tokens), n, x);
    trace("inp_embd", -1, x, n_embd);
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      const Layer& layer = layers_[size_t(il)];
      const DeepSeekMoeWeights& ffn = ffn_[size_t(il)];
      backend.rms_norm(x, layer.attn_norm.data(), xn, n, n_embd, hp_.rms_eps);
      trace("attn_norm", il, xn, n_embd);
      if (layer.recurrent) {
        kimi_delta_attention(backend, layer.kda, kda_shape_, request.sequences, il, xn, n,
                             kda_scratch_, branch, trace);
      } else {
        mla_attention(backend, layer.mla, mla_shape_, no_rope_, kq_scale_, request.sequences, il,
                      xn, n, mla_scratch_, branch, trace);
      }
      backend.add(x, branch, n * n_embd);
      const bool last = il + 1 == hp_.n_layer;
      deepseek_moe_residual(backend, ffn, layer.ffn_norm,
                            {last ? nullptr : &ffn_[size_t(il + 1)],
                             last ? nullptr : &layers_[size_t(il + 1)].ffn_norm},
                            hp_.rms_eps, request.experts, il, x, xn, branch, n, n_embd,
                            ffn_scratch_, trace);
    }
    const LogitRows out = logit_rows(backend, request, x, n, n_embd);
    output_logits(backend, head_, out.x, out.n_rows, hp_.rms_eps, request.logits, stream_.logits,
                  trace);
  }

 private:
  DecoderHParams hp_;
  MoeHParams moe_hp_;
  MlaShape mla_shape_;
  KdaShape kda_shape_;
  experts::ExpertLayout expert_layout_;
  ModelSummary summary_;
  RopeConfig no_rope_{RopeStyle::kNone, 0, 10000.0f, 1.0f, nullptr};
  float kq_scale_ = 1.0f;
  MatrixView token_embd_;  // [n_embd, n_vocab]
  OutputHead head_;
  std::vector<Layer> layers_;
  std::vector<DeepSeekMoeWeights> ffn_;  // [n_layer]

  ResidualStream stream_;
  MlaScratch mla_scratch_;
  KdaScratch kda_scratch_;
  DeepSeekMoeScratch ffn_scratch_;
};

}  // namespace

std::unique_ptr<LanguageModel> make_kimi_linear(const ModelFile& file) {
  return std::make_unique<KimiLinear>(file);
}

}  // namespace sluice::model
