// PreNormDecoder's binding and forward.
#include "model/blocks/pre_norm_decoder.h"

#include <cmath>

#include "core/error.h"
#include "model/blocks/residual_stream.h"
#include "model/hf_snapshot.h"

namespace sluice::model {
namespace {

struct Layer {
  std::vector<float> attn_norm;  // [n_embd]
  AttentionWeights attn;
  std::vector<float> ffn_norm;  // [n_embd]
  bool is_moe = false;
  GluFfnWeights ffn;  // when !is_moe
  MoeFfnWeights moe;  // when is_moe
};

RouterConfig router_config(const MoeHParams& moe, const PreNormDecoderOptions& options) {
  RouterConfig config;
  config.n_expert = moe.n_expert;
  config.n_expert_used = moe.n_expert_used;
  config.gating = ExpertGating::kSoftmax;
  config.norm_weights = moe.weights_norm.value_or(options.moe_norm_weights);
  config.weights_scale = moe.weights_scale;
  return config;
}

class PreNormDecoder final : public LanguageModel {
 public:
  PreNormDecoder(const ModelFile& file, const std::string& arch,
                 const PreNormDecoderOptions& options) {
    const ArchMetadata meta(file, arch);
    hp_ = read_decoder_hparams(meta);
    summary_ = {arch, hp_.n_vocab, hp_.n_embd, hp_.n_layer, hp_.n_ctx_train};
    shape_ = {hp_.n_embd,
              hp_.n_head,
              hp_.n_head_kv,
              hp_.head_dim_k,
              hp_.head_dim_v,
              hp_.rms_eps,
              options.qk_norm_across_heads};

    WeightBinder binder(file);
    token_embd_ = binder.matrix("token_embd.weight", hp_.n_embd, hp_.n_vocab);
    head_ = bind_output_head(binder, token_embd_, hp_.n_embd, hp_.n_vocab);
    if (auto factors = binder.optional_vector("rope_freqs.weight", hp_.n_rot / 2)) {
      rope_freq_factors_ = std::move(*factors);
    } else if (const MetaValue* hf = file.find(kHfRopeFreqFactors)) {
      rope_freq_factors_ = hf->array_as<float>().value_or(std::vector<float>{});
      if (int64_t(rope_freq_factors_.size()) != hp_.n_rot / 2) {
        fail(kHfRopeFreqFactors, " holds ", hf->array_length(), " factors, expected ",
             hp_.n_rot / 2);
      }
    }
    const bool any_moe = options.moe == MoeUse::kRequired ||
                         (options.moe == MoeUse::kWhenPresent && meta.find_int("expert_count"));
    if (any_moe) moe_hp_ = read_moe_hparams(meta, hp_);
    expert_layout_.files = binder.files();
    expert_layout_.layers.resize(size_t(hp_.n_layer));
    expert_layout_.n_expert_used = moe_hp_.n_expert_used;
    layers_.resize(size_t(hp_.n_layer));
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      Layer& layer = layers_[size_t(il)];
      layer.attn_norm = binder.vector(layer_tensor(il, "attn_norm.weight"), hp_.n_embd);
      layer.attn = bind_attention(binder, il, shape_, /*with_gate=*/false);
      layer.ffn_norm = binder.vector(layer_tensor(il, "ffn_norm.weight"), hp_.n_embd);
      layer.is_moe = options.moe == MoeUse::kRequired ||
                     (any_moe && binder.has(layer_tensor(il, "ffn_gate_inp.weight")));
      if (layer.is_moe) {
        layer.moe = bind_moe_ffn(binder, il, hp_.n_embd, moe_hp_.n_ff_exp,
                                 router_config(moe_hp_, options), expert_layout_);
      } else {
        layer.ffn = bind_glu_ffn(binder, il, hp_.n_embd, hp_.n_ff);
      }
      if (options.require_qkv_bias &&
          (layer.attn.bq.empty() || layer.attn.bk.empty() || layer.attn.bv.empty())) {
        fail(file.display_name(), ": ", arch, " needs blk.", il, ".attn_{q,k,v}.bias");
      }
      if (options.require_qk_norm && (layer.attn.q_norm.empty() || layer.attn.k_norm.empty())) {
        fail(file.display_name(), ": ", arch, " needs blk.", il, ".attn_{q,k}_norm.weight");
      }
    }
    binder.check_all_bound();

    config_.rope = {options.rope_style, hp_.n_rot, hp_.rope_freq_base, hp_.rope_freq_scale,
                    rope_freq_factors_.empty() ? nullptr : rope_freq_factors_.data()};
    config_.scale = 1.0f / std::sqrt(float(hp_.head_dim_k));
  }

  const ModelSummary& summary() const override { return summary_; }
  bool runs_on_device() const override { return true; }

  std::vector<KvLayerSpec> kv_layout() const override {
    return std::vector<KvLayerSpec>(size_t(hp_.n_layer),
                                    {hp_.n_head_kv, hp_.head_dim_k, hp_.head_dim_v, 0});
  }

  const experts::ExpertLayout& expert_layout() const override { return expert_layout_; }

  bool decode_reads_host(const Backend& backend, const experts::ExpertSource* experts,
                         const Backend* expert_backend) const override {
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      const Layer& layer = layers_[size_t(il)];
      if (!layer.is_moe) continue;
      if (experts == nullptr || !moe_decode_stays_on_backend(backend, layer.moe, *experts, il,
                                                             moe_scratch_, expert_backend)) {
        return true;
      }
    }
    return false;
  }

  void reserve(Backend& backend, int64_t n_batch) override {
    if (!stream_.grow(backend, n_batch, hp_.n_embd)) return;
    attn_scratch_.reserve(backend, shape_, n_batch);
    ffn_scratch_.reserve(backend, hp_.n_ff, n_batch);
    for (const Layer& layer : layers_) {
      if (!layer.is_moe) continue;
      moe_scratch_.reserve(backend, layer.moe, hp_.n_embd, n_batch);
      spec_scratch_.reserve(backend, layer.moe, hp_.n_embd, n_batch);
      break;
    }
  }

  void forward(Backend& backend, const ForwardRequest& request) override {
    const int64_t n = int64_t(request.tokens.size());
    const int64_t n_embd = hp_.n_embd;
    const Trace trace{request.observer, n, &backend};
    float* x = stream_.x.data();
    backend.get_rows(token_embd_, stream_.token_ids(backend, request.tokens), n, x);
    trace("inp_embd", -1, x, n_embd);
    // Each residual add is fused with the norm that reads its sum (add_rms_norm: the numbers of
    // add then rms_norm, one kernel on a GPU): x keeps the sum, xn gets the norm, and nothing
    // reads x between the two, so the traces see what they saw unfused.
    backend.rms_norm(x, layers_[0].attn_norm.data(), stream_.xn.data(), n, n_embd, hp_.rms_eps);
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      const Layer& layer = layers_[size_t(il)];
      trace("attn_norm", il, stream_.xn.data(), n_embd);
      self_attention(backend, layer.attn, shape_, config_, request.sequences, il, stream_.xn.data(),
                     n, attn_scratch_, stream_.branch.data(), trace);
      backend.add_rms_norm(x, stream_.branch.data(), layer.ffn_norm.data(), stream_.xn.data(), n,
                           n_embd, hp_.rms_eps);
      trace("ffn_inp", il, x, n_embd);
      trace("ffn_norm", il, stream_.xn.data(), n_embd);
      if (layer.is_moe) {
        if (request.experts == nullptr)
          fail(summary_.architecture, ": MoE forward without experts");
        moe_route(backend, layer.moe, *request.experts, il, stream_.xn.data(), n, moe_scratch_,
                  trace, request.expert_backend);
        if (il + 1 < hp_.n_layer && layers_[size_t(il + 1)].is_moe) {
          const Layer& next = layers_[size_t(il + 1)];
          moe_prefetch(backend, next.moe, next.ffn_norm, hp_.rms_eps, *request.experts, il + 1, x,
                       n, n_embd, spec_scratch_);
        }
        moe_compute(backend, layer.moe, *request.experts, il, stream_.xn.data(), n, n_embd,
                    moe_scratch_, stream_.branch.data(), trace, request.expert_backend);
      } else {
        glu_ffn(backend, layer.ffn, GluActivation::kSilu, il, stream_.xn.data(), n, ffn_scratch_,
                stream_.branch.data(), trace);
      }
      if (il + 1 < hp_.n_layer) {  // and the next layer's attention norm
        backend.add_rms_norm(x, stream_.branch.data(), layers_[size_t(il + 1)].attn_norm.data(),
                             stream_.xn.data(), n, n_embd, hp_.rms_eps);
      } else {
        backend.add(x, stream_.branch.data(), n * n_embd);
      }
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
  AttentionLayerConfig config_;
  MatrixView token_embd_;  // [n_embd, n_vocab]
  OutputHead head_;
  std::vector<float> rope_freq_factors_;  // [n_rot / 2]; empty when the file has none
  std::vector<Layer> layers_;

  ResidualStream stream_;
  AttentionScratch attn_scratch_;
  FfnScratch ffn_scratch_;
  MoeScratch moe_scratch_;
  MoeScratch spec_scratch_;
};

}  // namespace

std::unique_ptr<LanguageModel> make_pre_norm_decoder(const ModelFile& file, const std::string& arch,
                                                     const PreNormDecoderOptions& options) {
  return std::make_unique<PreNormDecoder>(file, arch, options);
}

}  // namespace sluice::model
