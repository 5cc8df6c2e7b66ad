// gpt-oss (OpenAI gpt-oss-20b, -120b), as llama.cpp builds LLM_ARCH_OPENAI_MOE: pre-norm layers
// whose attention has q/k/v/o biases and one sink logit per head, sliding-window layers (period 2
// from layer 0, or attention.sliding_window_pattern) between full ones, NeoX RoPE, scale
// 1/sqrt(n_rot), YaRN as the file says; the FFN norm is post_attention_norm, and every FFN is a
// Mixture of Experts with a biased router (top-k on the logits, softmax of the chosen), per-expert
// biases and swiglu_oai.
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "model/arch/architectures.h"
#include "model/blocks/attention.h"
#include "model/blocks/moe_ffn.h"
#include "model/blocks/output_head.h"
#include "model/blocks/residual_stream.h"
#include "model/blocks/sandwich_decoder.h"
#include "model/hparams.h"
#include "model/rope_scaling.h"

namespace sluice::model {
namespace {

constexpr const char* kArch = "gpt-oss";

struct Layer {
  std::vector<float> attn_norm;  // [n_embd]
  AttentionWeights attn;
  AttentionLayerConfig config;
  std::vector<float> ffn_norm;  // [n_embd] post_attention_norm.weight
  MoeFfnWeights moe;
};

class GptOssDecoder final : public LanguageModel {
 public:
  explicit GptOssDecoder(const ModelFile& file) {
    const ArchMetadata meta(file, kArch);
    hp_ = read_decoder_hparams(meta);
    moe_hp_ = read_moe_hparams(meta, hp_);
    if (hp_.head_dim_k != hp_.n_rot || hp_.head_dim_v != hp_.n_rot) {
      fail(file.display_name(), ": ", kArch, ": heads of ", hp_.head_dim_k, "/", hp_.head_dim_v,
           " with rope.dimension_count ", hp_.n_rot, " (llama.cpp needs them equal)");
    }
    summary_ = {kArch, hp_.n_vocab, hp_.n_embd, hp_.n_layer, hp_.n_ctx_train};
    shape_ = {hp_.n_embd, hp_.n_head, hp_.n_head_kv, hp_.head_dim_k, hp_.head_dim_v, hp_.rms_eps};

    const int64_t window = meta.checked("attention.sliding_window",
                                        meta.get_int("attention.sliding_window"), 1, INT32_MAX);
    const int64_t period =
        meta.checked("attention.sliding_window_pattern",
                     meta.get_int("attention.sliding_window_pattern", 2), 0, 4096);
    const std::vector<bool> sliding = sliding_pattern(hp_.n_layer, period);
    // Sliding layers may have their own base (rope.freq_base_swa); the scaling is the context's.
    const float swa_freq_base = meta.get_float("rope.freq_base_swa", hp_.rope_freq_base);
    const RopeScaling rope_scaling =
        read_rope_scaling(meta, hp_.n_ctx_train, /*deepseek_yarn=*/false);

    RouterConfig router;
    router.n_expert = moe_hp_.n_expert;
    router.n_expert_used = moe_hp_.n_expert_used;
    router.gating = ExpertGating::kSoftmaxWeight;
    router.norm_weights = false;
    router.weights_scale = moe_hp_.weights_scale;

    WeightBinder binder(file);
    token_embd_ = binder.matrix("token_embd.weight", hp_.n_embd, hp_.n_vocab);
    head_ = bind_output_head(binder, token_embd_, hp_.n_embd, hp_.n_vocab);
    expert_layout_.files = binder.files();
    expert_layout_.layers.resize(size_t(hp_.n_layer));
    expert_layout_.n_expert_used = moe_hp_.n_expert_used;
    layers_.resize(size_t(hp_.n_layer));
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      Layer& l = layers_[size_t(il)];
      l.attn_norm = binder.vector(layer_tensor(il, "attn_norm.weight"), hp_.n_embd);
      l.attn = bind_attention(binder, il, shape_, /*with_gate=*/false);
      if (l.attn.bq.empty() || l.attn.bk.empty() || l.attn.bv.empty() || l.attn.bo.empty()) {
        fail(file.display_name(), ": ", kArch, " needs blk.", il, ".attn_{q,k,v,output}.bias");
      }
      if (!l.attn.q_norm.empty() || !l.attn.k_norm.empty()) {
        fail(file.display_name(), ": ", kArch, " has no blk.", il, ".attn_{q,k}_norm.weight");
      }
      l.attn.sinks = binder.vector(layer_tensor(il, "attn_sinks.weight"), hp_.n_head);
      const bool slides = sliding[size_t(il)];
      l.config.rope = {RopeStyle::kNeox, hp_.n_rot, slides ? swa_freq_base : hp_.rope_freq_base,
                       1.0f, nullptr};
      apply_rope_scaling(rope_scaling, l.config.rope);
      l.config.window = slides ? window : 0;
      l.config.scale = 1.0f / std::sqrt(float(hp_.n_rot));
      l.ffn_norm = binder.vector(layer_tensor(il, "post_attention_norm.weight"), hp_.n_embd);
      l.moe = bind_moe_ffn(binder, il, hp_.n_embd, moe_hp_.n_ff_exp, router, expert_layout_);
      l.moe.act = GluActivation::kSwigluOai;
      bind_moe_biases(binder, il, hp_.n_embd, l.moe);
    }
    binder.check_all_bound();
  }

  const ModelSummary& summary() const override { return summary_; }

  std::vector<KvLayerSpec> kv_layout() const override {
    std::vector<KvLayerSpec> specs;
    for (const Layer& l : layers_) {
      specs.push_back({hp_.n_head_kv, hp_.head_dim_k, hp_.head_dim_v, l.config.window});
    }
    return specs;
  }

  const experts::ExpertLayout& expert_layout() const override { return expert_layout_; }
  // Sinks are AttentionCall's, the per-expert biases add_bias (add_expert_bias by id on the
  // stacked paths), swiglu_oai a glu, the router's top-k and softmax of the chosen
  // select_experts: every step a backend op.
  bool runs_on_device() const override { return true; }

  // A decode step reads nothing back when every layer chooses on the backend (experts all in
  // their stacks: moe_decode_stays_on_backend), so a GPU may record it.
  bool decode_reads_host(const Backend& backend, const experts::ExpertSource* experts,
                         const Backend* expert_backend) const override {
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      if (experts == nullptr ||
          !moe_decode_stays_on_backend(backend, layers_[size_t(il)].moe, *experts, il, moe_scratch_,
                                       expert_backend)) {
        return true;
      }
    }
    return false;
  }

  void reserve(Backend& backend, int64_t n_batch) override {
    if (!stream_.grow(backend, n_batch, hp_.n_embd)) return;
    attn_scratch_.reserve(backend, shape_, n_batch);
    moe_scratch_.reserve(backend, layers_.front().moe, hp_.n_embd, n_batch);
    spec_scratch_.reserve(backend, layers_.front().moe, hp_.n_embd, n_batch);
  }

  void forward(Backend& backend, const ForwardRequest& request) override {
    if (request.experts == nullptr) fail(kArch, ": MoE forward without experts");
    const int64_t n = int64_t(request.tokens.size());
    const int64_t n_embd = hp_.n_embd;
    const Trace trace{request.observer, n, &backend};
    float* x = stream_.x.data();
    backend.get_rows(token_embd_, stream_.token_ids(backend, request.tokens), n, x);
    trace("inp_embd", -1, x, n_embd);
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      const Layer& l = layers_[size_t(il)];
      backend.rms_norm(x, l.attn_norm.data(), stream_.xn.data(), n, n_embd, hp_.rms_eps);
      trace("attn_norm", il, stream_.xn.data(), n_embd);
      self_attention(backend, l.attn, shape_, l.config, request.sequences, il, stream_.xn.data(), n,
                     attn_scratch_, stream_.branch.data(), trace);
      backend.add(x, stream_.branch.data(), n * n_embd);
      trace("ffn_inp", il, x, n_embd);
      backend.rms_norm(x, l.ffn_norm.data(), stream_.xn.data(), n, n_embd, hp_.rms_eps);
      trace("attn_post_norm", il, stream_.xn.data(), n_embd);
      moe_route(backend, l.moe, *request.experts, il, stream_.xn.data(), n, moe_scratch_, trace,
                request.expert_backend);
      if (il + 1 < hp_.n_layer) {  // every gpt-oss layer is MoE
        const Layer& next = layers_[size_t(il + 1)];
        moe_prefetch(backend, next.moe, next.ffn_norm, hp_.rms_eps, *request.experts, il + 1, x, n,
                     n_embd, spec_scratch_);
      }
      moe_compute(backend, l.moe, *request.experts, il, stream_.xn.data(), n, n_embd, moe_scratch_,
                  stream_.branch.data(), trace, request.expert_backend);
      backend.add(x, stream_.branch.data(), n * n_embd);
      trace("l_out", il, x, n_embd);
    }
    const LogitRows out = logit_rows(backend, request, x, n, n_embd);
    output_logits(backend, head_, out.x, out.n_rows, hp_.rms_eps, request.logits, stream_.logits,
                  trace);
  }

 private:
  DecoderHParams hp_;
  MoeHParams moe_hp_;
  experts::ExpertLayout expert_layout_;
  ModelSummary summary_;
  AttentionShape shape_;
  MatrixView token_embd_;  // [n_embd, n_vocab]
  OutputHead head_;
  std::vector<Layer> layers_;

  ResidualStream stream_;
  AttentionScratch attn_scratch_;
  MoeScratch moe_scratch_;
  MoeScratch spec_scratch_;
};

}  // namespace

std::unique_ptr<LanguageModel> make_gpt_oss(const ModelFile& file) {
  return std::make_unique<GptOssDecoder>(file);
}

}  // namespace sluice::model
