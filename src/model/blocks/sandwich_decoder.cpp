// SandwichDecoder's binding and forward.
#include "model/blocks/sandwich_decoder.h"

#include "core/error.h"
#include "model/blocks/ffn.h"
#include "model/blocks/output_head.h"
#include "model/blocks/residual_stream.h"

namespace sluice::model {
namespace {

struct Layer {
  std::vector<float> attn_norm, attn_post_norm;  // [n_embd]
  AttentionWeights attn;
  std::vector<float> ffn_norm, ffn_post_norm;  // [n_embd]
  GluFfnWeights ffn;
};

// Gemma's RMS norms multiply by (1 + w); a file that stores w gets the 1 added once, here.
void offset_norms(std::vector<Layer>& layers, OutputHead& head, float offset) {
  auto add = [offset](std::vector<float>& w) {
    for (float& v : w) v += offset;
  };
  add(head.norm);
  for (Layer& l : layers) {
    for (auto* w : {&l.attn_norm, &l.attn_post_norm, &l.ffn_norm, &l.ffn_post_norm, &l.attn.q_norm,
                    &l.attn.k_norm}) {
      add(*w);
    }
  }
}

class SandwichDecoder final : public LanguageModel {
 public:
  SandwichDecoder(const ModelFile& file, SandwichDecoderConfig config) : c_(std::move(config)) {
    const DecoderHParams& hp = c_.hp;
    if (int64_t(c_.layers.size()) != hp.n_layer) fail("sandwich decoder: layer configs");
    summary_ = {c_.arch, hp.n_vocab, hp.n_embd, hp.n_layer, hp.n_ctx_train};
    shape_ = {hp.n_embd, hp.n_head, hp.n_head_kv, hp.head_dim_k, hp.head_dim_v, hp.rms_eps};
    WeightBinder binder(file);
    token_embd_ = binder.matrix("token_embd.weight", hp.n_embd, hp.n_vocab);
    if (c_.require_output && !binder.has("output.weight")) {
      fail(file.display_name(), ": ", c_.arch, " needs output.weight");
    }
    head_ = bind_output_head(binder, token_embd_, hp.n_embd, hp.n_vocab);
    layers_.resize(size_t(hp.n_layer));
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      Layer& l = layers_[size_t(il)];
      l.attn_norm = binder.vector(layer_tensor(il, "attn_norm.weight"), hp.n_embd);
      l.attn_post_norm = binder.vector(layer_tensor(il, "post_attention_norm.weight"), hp.n_embd);
      l.attn = bind_attention(binder, il, shape_, c_.attn_gate);
      l.ffn_norm = binder.vector(layer_tensor(il, "ffn_norm.weight"), hp.n_embd);
      l.ffn_post_norm = binder.vector(layer_tensor(il, "post_ffw_norm.weight"), hp.n_embd);
      l.ffn = bind_glu_ffn(binder, il, hp.n_embd, hp.n_ff);
    }
    binder.check_all_bound();
    if (c_.norm_weight_offset != 0.0f) offset_norms(layers_, head_, c_.norm_weight_offset);
  }

  const ModelSummary& summary() const override { return summary_; }
  bool runs_on_device() const override { return true; }

  std::vector<KvLayerSpec> kv_layout() const override {
    std::vector<KvLayerSpec> specs;
    for (const AttentionLayerConfig& layer : c_.layers) {
      specs.push_back({c_.hp.n_head_kv, c_.hp.head_dim_k, c_.hp.head_dim_v, layer.window});
    }
    return specs;
  }

  void reserve(Backend& backend, int64_t n_batch) override {
    if (!stream_.grow(backend, n_batch, c_.hp.n_embd)) return;
    attn_scratch_.reserve(backend, shape_, n_batch);
    ffn_scratch_.reserve(backend, c_.hp.n_ff, n_batch);
  }

  void forward(Backend& backend, const ForwardRequest& request) override {
    const DecoderHParams& hp = c_.hp;
    const int64_t n = int64_t(request.tokens.size());
    const int64_t n_embd = hp.n_embd;
    const Trace trace{request.observer, n, &backend};
    float* x = stream_.x.data();
    backend.get_rows(token_embd_, stream_.token_ids(backend, request.tokens), n, x);
    if (c_.embd_scale != 1.0f) backend.scale(x, c_.embd_scale, n * n_embd);
    if (c_.embd_norm) backend.rms_norm(x, nullptr, x, n, n_embd, hp.rms_eps);
    trace("inp_embd", -1, x, n_embd);
    // Each branch's post-norm and residual add are fused with the norm that reads the sum
    // (post_norm_add_rms_norm: the numbers of rms_norm, add, rms_norm; one kernel on a GPU): x
    // keeps the sum, xn gets the next norm, and nothing reads x between them, so the traces see
    // what they saw unfused. The last layer's sum is normed by the output head, rows picked first.
    float* xn = stream_.xn.data();
    float* branch = stream_.branch.data();
    backend.rms_norm(x, layers_[0].attn_norm.data(), xn, n, n_embd, hp.rms_eps);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      const Layer& l = layers_[size_t(il)];
      trace("attn_norm", il, xn, n_embd);
      self_attention(backend, l.attn, shape_, c_.layers[size_t(il)], request.sequences, il, xn, n,
                     attn_scratch_, branch, trace);
      backend.post_norm_add_rms_norm(x, branch, l.attn_post_norm.data(), c_.post_norm_eps,
                                     l.ffn_norm.data(), xn, n, n_embd, hp.rms_eps);
      trace("ffn_inp", il, x, n_embd);
      glu_ffn(backend, l.ffn, c_.activation, il, xn, n, ffn_scratch_, branch, trace);
      const bool last = il + 1 == hp.n_layer;  // else: and the next layer's attention norm
      backend.post_norm_add_rms_norm(x, branch, l.ffn_post_norm.data(), c_.post_norm_eps,
                                     last ? nullptr : layers_[size_t(il + 1)].attn_norm.data(),
                                     last ? nullptr : xn, n, n_embd, hp.rms_eps);
      trace("l_out", il, x, n_embd);
    }
    const LogitRows out = logit_rows(backend, request, x, n, n_embd);
    output_logits(backend, head_, out.x, out.n_rows, hp.rms_eps, request.logits, stream_.logits,
                  trace, {c_.logit_scale, c_.final_softcap});
  }

 private:
  SandwichDecoderConfig c_;
  ModelSummary summary_;
  AttentionShape shape_;
  MatrixView token_embd_;  // [n_embd, n_vocab]
  OutputHead head_;
  std::vector<Layer> layers_;

  ResidualStream stream_;
  AttentionScratch attn_scratch_;
  FfnScratch ffn_scratch_;
};

}  // namespace

std::unique_ptr<LanguageModel> make_sandwich_decoder(const ModelFile& file,
                                                     SandwichDecoderConfig config) {
  return std::make_unique<SandwichDecoder>(file, std::move(config));
}

std::vector<bool> sliding_pattern(int64_t n_layer, int64_t period) {
  std::vector<bool> sliding(static_cast<size_t>(n_layer));
  for (int64_t il = 0; il < n_layer; ++il) {
    sliding[size_t(il)] = period == 0 || il % period < period - 1;
  }
  return sliding;
}

}  // namespace sluice::model
