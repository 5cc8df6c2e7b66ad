// HybridDecoder's hyper-parameters, binding and forward.
#include "model/blocks/hybrid_decoder.h"

#include <cmath>

#include "core/error.h"
#include "model/blocks/attention.h"
#include "model/blocks/ffn.h"
#include "model/blocks/output_head.h"
#include "model/blocks/residual_stream.h"
#include "model/blocks/shared_expert_moe.h"
#include "model/hparams.h"
#include "model/rope_scaling.h"

namespace sluice::model {
namespace {

struct Layer {
  bool recurrent = false;
  std::vector<float> attn_norm;  // [n_embd]
  GatedDeltaNetWeights delta;    // when recurrent
  AttentionWeights attn;         // otherwise
  std::vector<float> ffn_norm;   // [n_embd] post_attention_norm
  GluFfnWeights ffn;             // dense
  SharedExpertMoeWeights moe;    // options.moe
};

// Whether every rotated pair of an M-RoPE with these sections reads the text position (sections
// 0-2, which llama.cpp sets equal for text) and none the 4th, whose component is 0: checked for
// both ggml's interleaved (qwen35's) and its contiguous section layouts.
bool text_rope_is_neox(const std::vector<int64_t>& s, int64_t n_rot) {
  const int64_t total = s[0] + s[1] + s[2] + s[3];
  if (total <= 0) return false;
  for (int64_t pair = 0; pair < n_rot / 2; ++pair) {
    const int64_t sector = pair % total;
    const bool interleaved_text = (sector % 3 == 0 && sector < 3 * s[0]) ||
                                  (sector % 3 == 1 && sector < 3 * s[1]) ||
                                  (sector % 3 == 2 && sector < 3 * s[2]);
    const bool contiguous_text = sector < s[0] + s[1] + s[2];
    if (!interleaved_text || !contiguous_text) return false;
  }
  return true;
}

GatedDeltaNetShape read_delta_shape(const ArchMetadata& meta, const DecoderHParams& hp,
                                    const HybridDecoderOptions& options) {
  GatedDeltaNetShape s;
  s.n_embd = hp.n_embd;
  s.conv_kernel = meta.checked("ssm.conv_kernel", meta.get_int("ssm.conv_kernel"), 1, 64);
  s.head_dim = meta.checked("ssm.state_size", meta.get_int("ssm.state_size"), 1, 1024);
  s.n_k_heads = meta.checked("ssm.group_count", meta.get_int("ssm.group_count"), 1, 4096);
  s.n_v_heads = meta.checked("ssm.time_step_rank", meta.get_int("ssm.time_step_rank"), 1, 4096);
  if (s.n_v_heads % s.n_k_heads != 0) meta.checked("ssm.group_count", -1, 1, s.n_v_heads);
  // llama.cpp's delta rule needs value heads as wide as key heads (ssm.state_size).
  const int64_t inner = meta.get_int("ssm.inner_size");
  meta.checked("ssm.inner_size", inner, s.value_dim(), s.value_dim());
  s.norm_eps = hp.rms_eps;
  s.sharing = options.key_heads;
  s.joint_beta_alpha = options.joint_beta_alpha;
  return s;
}

RouterConfig shared_expert_router(const MoeHParams& moe) {
  RouterConfig config;
  config.n_expert = moe.n_expert;
  config.n_expert_used = moe.n_expert_used;
  config.gating = ExpertGating::kSoftmax;
  config.norm_weights = true;  // llama.cpp renormalises for these families, whatever the file says
  config.weights_scale = moe.weights_scale;
  return config;
}

class HybridDecoder final : public LanguageModel {
 public:
  HybridDecoder(const ModelFile& file, const std::string& arch, const HybridDecoderOptions& options)
      : options_(options) {
    const ArchMetadata meta(file, arch);
    hp_ = read_decoder_hparams(meta);
    const int64_t n_nextn = meta.checked(
        "nextn_predict_layers", meta.get_int("nextn_predict_layers", 0), 0, hp_.n_layer - 1);
    hp_.n_layer -= n_nextn;  // multi-token prediction layers: loaded by llama.cpp, never run
    summary_ = {arch, hp_.n_vocab, hp_.n_embd, hp_.n_layer, hp_.n_ctx_train};
    if (hp_.head_dim_k != hp_.head_dim_v) {
      fail(file.display_name(), ": ", arch, " needs attention.key_length == value_length");
    }
    shape_ = {hp_.n_embd, hp_.n_head, hp_.n_head_kv, hp_.head_dim_k, hp_.head_dim_v, hp_.rms_eps};
    shape_.gated_query = true;
    delta_shape_ = read_delta_shape(meta, hp_, options);
    if (options.rope_sections) {
      const std::vector<int64_t> sections = meta.get_per_layer("rope.dimension_sections", 4);
      if (!text_rope_is_neox(sections, hp_.n_rot)) {
        fail(file.display_name(), ": ", arch,
             ": rope.dimension_sections that rotate by a non-text position are not supported");
      }
    }
    const int64_t interval = meta.checked("full_attention_interval",
                                          meta.get_int("full_attention_interval", 4), 1, 4096);
    if (options.moe) moe_hp_ = read_moe_hparams(meta, hp_);

    WeightBinder binder(file);
    token_embd_ = binder.matrix("token_embd.weight", hp_.n_embd, hp_.n_vocab);
    head_ = bind_output_head(binder, token_embd_, hp_.n_embd, hp_.n_vocab);
    expert_layout_.files = binder.files();
    expert_layout_.layers.resize(size_t(hp_.n_layer));
    expert_layout_.n_expert_used = moe_hp_.n_expert_used;
    layers_.resize(size_t(hp_.n_layer));
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      Layer& l = layers_[size_t(il)];
      l.recurrent = (il + 1) % interval != 0;
      l.attn_norm = binder.vector(layer_tensor(il, "attn_norm.weight"), hp_.n_embd);
      if (l.recurrent) {
        l.delta = bind_gated_delta_net(binder, il, delta_shape_);
      } else {
        l.attn = bind_attention(binder, il, shape_, /*with_gate=*/false);
        if (l.attn.q_norm.empty() || l.attn.k_norm.empty()) {
          fail(file.display_name(), ": ", arch, " needs blk.", il, ".attn_{q,k}_norm.weight");
        }
      }
      l.ffn_norm = binder.vector(layer_tensor(il, "post_attention_norm.weight"), hp_.n_embd);
      if (options.moe) {
        l.moe = bind_shared_expert_moe(binder, il, hp_.n_embd, moe_hp_.n_ff_exp, moe_hp_.n_ff_shexp,
                                       shared_expert_router(moe_hp_), expert_layout_);
      } else {
        l.ffn = bind_glu_ffn(binder, il, hp_.n_embd, hp_.n_ff);
      }
    }
    binder.ignore_layers_from(hp_.n_layer);
    binder.check_all_bound();

    config_.rope = {RopeStyle::kNeox, hp_.n_rot, hp_.rope_freq_base, 1.0f, nullptr};
    apply_rope_scaling(read_rope_scaling(meta, hp_.n_ctx_train, /*deepseek_yarn=*/false),
                       config_.rope);
    config_.scale = 1.0f / std::sqrt(float(hp_.head_dim_k));
  }

  const ModelSummary& summary() const override { return summary_; }
  // Recurrent layers, gated attention and the (shared-expert) FFN are backend ops throughout.
  bool runs_on_device() const override { return true; }

  bool decode_reads_host(const Backend& backend, const experts::ExpertSource* experts,
                         const Backend* expert_backend) const override {
    if (!options_.moe) return false;
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      if (experts == nullptr ||
          !moe_decode_stays_on_backend(backend, layers_[size_t(il)].moe.routed, *experts, il,
                                       moe_scratch_.moe, expert_backend)) {
        return true;
      }
    }
    return false;
  }

  std::vector<KvLayerSpec> kv_layout() const override {
    std::vector<KvLayerSpec> specs;
    for (const Layer& l : layers_) {
      specs.push_back(l.recurrent ? delta_shape_.cache_spec()
                                  : KvLayerSpec{hp_.n_head_kv, hp_.head_dim_k, hp_.head_dim_v, 0});
    }
    return specs;
  }

  const experts::ExpertLayout& expert_layout() const override { return expert_layout_; }

  void reserve(Backend& backend, int64_t n_batch) override {
    if (!stream_.grow(backend, n_batch, hp_.n_embd)) return;
    attn_scratch_.reserve(backend, shape_, n_batch);
    delta_scratch_.reserve(backend, delta_shape_, n_batch);
    if (options_.moe) {
      moe_scratch_.reserve(backend, layers_.front().moe, hp_.n_embd, n_batch);
    } else {
      ffn_scratch_.reserve(backend, hp_.n_ff, n_batch);
    }
  }

  void forward(Backend& backend, const ForwardRequest& request) override {
    if (options_.moe && request.experts == nullptr) {
      fail(summary_.architecture, ": MoE forward without experts");
    }
    const int64_t n = int64_t(request.tokens.size());
    const int64_t n_embd = hp_.n_embd;
    const Trace trace{request.observer, n, &backend};
    float* x = stream_.x.data();
    float* xn = stream_.xn.data();
    float* branch = stream_.branch.data();
    backend.get_rows(token_embd_, stream_.token_ids(backend, request.tokens), n, x);
    trace("inp_embd", -1, x, n_embd);
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      const Layer& l = layers_[size_t(il)];
      backend.rms_norm(x, l.attn_norm.data(), xn, n, n_embd, hp_.rms_eps);
      trace("attn_norm", il, xn, n_embd);
      if (l.recurrent) {
        gated_delta_net(backend, l.delta, delta_shape_, request.sequences, il, xn, n,
                        delta_scratch_, branch, trace);
      } else {
        self_attention(backend, l.attn, shape_, config_, request.sequences, il, xn, n,
                       attn_scratch_, branch, trace);
      }
      backend.add(x, branch, n * n_embd);
      trace("attn_residual", il, x, n_embd);
      backend.rms_norm(x, l.ffn_norm.data(), xn, n, n_embd, hp_.rms_eps);
      trace("attn_post_norm", il, xn, n_embd);
      if (options_.moe) {
        experts::ExpertSource& source = *request.experts;
        shared_expert_moe_route(backend, l.moe, source, il, xn, n, moe_scratch_, trace,
                                request.expert_backend);
        if (il + 1 < hp_.n_layer) {
          const Layer& next = layers_[size_t(il + 1)];
          shared_expert_moe_prefetch(backend, next.moe, next.ffn_norm, hp_.rms_eps, source, il + 1,
                                     x, n, n_embd, moe_scratch_);
        }
        shared_expert_moe_compute(backend, l.moe, source, il, xn, n, n_embd, moe_scratch_, branch,
                                  trace, request.expert_backend);
      } else {
        glu_ffn(backend, l.ffn, GluActivation::kSilu, il, xn, n, ffn_scratch_, branch, trace);
      }
      backend.add(x, branch, n * n_embd);
      trace("l_out", il, x, n_embd);
    }
    const LogitRows out = logit_rows(backend, request, x, n, n_embd);
    output_logits(backend, head_, out.x, out.n_rows, hp_.rms_eps, request.logits, stream_.logits,
                  trace);
  }

 private:
  HybridDecoderOptions options_;
  DecoderHParams hp_;
  MoeHParams moe_hp_;
  experts::ExpertLayout expert_layout_;
  ModelSummary summary_;
  AttentionShape shape_;
  AttentionLayerConfig config_;
  GatedDeltaNetShape delta_shape_;
  MatrixView token_embd_;  // [n_embd, n_vocab]
  OutputHead head_;
  std::vector<Layer> layers_;

  ResidualStream stream_;
  AttentionScratch attn_scratch_;
  GatedDeltaNetScratch delta_scratch_;
  FfnScratch ffn_scratch_;
  SharedExpertMoeScratch moe_scratch_;
};

}  // namespace

std::unique_ptr<LanguageModel> make_hybrid_decoder(const ModelFile& file, const std::string& arch,
                                                   const HybridDecoderOptions& options) {
  return std::make_unique<HybridDecoder>(file, arch, options);
}

}  // namespace sluice::model
