// The DeepSeekMoE pre-norm decoder's forward, shared by the architectures that bind it.
#include "model/blocks/deepseek_moe_decoder.h"

#include <algorithm>
#include <string_view>

#include "model/blocks/residual_stream.h"

namespace sluice::model {
namespace {

// Passes observations on under the family's own names (e.g. llama.cpp's laguna graph calls the
// roped query Qcur_rope where the attention block says Qcur).
class RenamingObserver final : public ActivationObserver {
 public:
  RenamingObserver(ActivationObserver* next,
                   const std::vector<std::pair<std::string, std::string>>& renames)
      : next_(next), renames_(renames) {}
  void observe(std::string_view name, int64_t layer, const float* data, int64_t n_tokens,
               int64_t row) override {
    for (const auto& [from, to] : renames_) {
      if (name == from) {
        name = to;
        break;
      }
    }
    next_->observe(name, layer, data, n_tokens, row);
  }

 private:
  ActivationObserver* next_;
  const std::vector<std::pair<std::string, std::string>>& renames_;
};

class DeepSeekMoeDecoder final : public LanguageModel {
 public:
  explicit DeepSeekMoeDecoder(DeepSeekMoeDecoderConfig config) : c_(std::move(config)) {
    max_shape_ = c_.layers.front().shape;
    for (const DeepSeekMoeDecoderLayer& l : c_.layers) {
      max_shape_.n_head = std::max(max_shape_.n_head, l.shape.n_head);
    }
  }

  const ModelSummary& summary() const override { return c_.summary; }

  std::vector<KvLayerSpec> kv_layout() const override {
    std::vector<KvLayerSpec> specs;
    for (const DeepSeekMoeDecoderLayer& l : c_.layers) {
      specs.push_back({l.shape.n_head_kv, l.shape.head_dim_k, l.shape.head_dim_v, l.config.window});
    }
    return specs;
  }

  const experts::ExpertLayout& expert_layout() const override { return c_.expert_layout; }
  bool runs_on_device() const override { return c_.runs_on_device; }
  // Attention reads nothing back; the DeepSeekMoE layers do unless every choice stays on the
  // backend. Then a GPU may record the decode step.
  bool decode_reads_host(const Backend& backend, const experts::ExpertSource* experts,
                         const Backend* expert_backend) const override {
    return deepseek_moe_decode_reads_host(backend, c_.ffn, experts, ffn_scratch_, expert_backend);
  }

  void reserve(Backend& backend, int64_t n_batch) override {
    if (!stream_.grow(backend, n_batch, c_.hp.n_embd)) return;
    attn_scratch_.reserve(backend, max_shape_, n_batch);
    ffn_scratch_.reserve(backend, c_.ffn, c_.hp.n_embd, n_batch);
  }

  void forward(Backend& backend, const ForwardRequest& request) override {
    const int64_t n = int64_t(request.tokens.size());
    const int64_t n_embd = c_.hp.n_embd;
    const float eps = c_.hp.rms_eps;
    RenamingObserver renamed(request.observer, c_.trace_renames);
    const bool rename = request.observer != nullptr && !c_.trace_renames.empty();
    const Trace trace{rename ? &renamed : request.observer, n, &backend};
    float* x = stream_.x.data();
    backend.get_rows(c_.token_embd, stream_.token_ids(backend, request.tokens), n, x);
    trace("inp_embd", -1, x, n_embd);
    const int64_t n_layer = int64_t(c_.layers.size());
    for (int64_t il = 0; il < n_layer; ++il) {
      const DeepSeekMoeDecoderLayer& l = c_.layers[size_t(il)];
      const DeepSeekMoeWeights& ffn = c_.ffn[size_t(il)];
      backend.rms_norm(x, l.attn_norm.data(), stream_.xn.data(), n, n_embd, eps);
      trace("attn_norm", il, stream_.xn.data(), n_embd);
      self_attention(backend, l.attn, l.shape, l.config, request.sequences, il, stream_.xn.data(),
                     n, attn_scratch_, stream_.branch.data(), trace);
      backend.add(x, stream_.branch.data(), n * n_embd);
      const bool last = il + 1 == n_layer;
      deepseek_moe_residual(backend, ffn, l.ffn_norm,
                            {last ? nullptr : &c_.ffn[size_t(il + 1)],
                             last ? nullptr : &c_.layers[size_t(il + 1)].ffn_norm},
                            eps, request.experts, il, x, stream_.xn.data(), stream_.branch.data(),
                            n, n_embd, ffn_scratch_, trace, c_.ffn_norm_trace,
                            request.expert_backend);
    }
    const LogitRows out = logit_rows(backend, request, x, n, n_embd);
    output_logits(backend, c_.head, out.x, out.n_rows, eps, request.logits, stream_.logits, trace);
  }

 private:
  DeepSeekMoeDecoderConfig c_;
  AttentionShape max_shape_;  // the most heads of any layer: the scratch's size
  ResidualStream stream_;
  AttentionScratch attn_scratch_;
  DeepSeekMoeScratch ffn_scratch_;
};

}  // namespace

std::unique_ptr<LanguageModel> make_deepseek_moe_decoder(DeepSeekMoeDecoderConfig config) {
  return std::make_unique<DeepSeekMoeDecoder>(std::move(config));
}

}  // namespace sluice::model
