// laguna (poolside Laguna XS.2 / M.1), as llama.cpp builds LLM_ARCH_LAGUNA: a pre-norm decoder
// whose head count varies per layer; attention has per-head Q/K norms and a softplus output gate
// computed from the attention's input (one logit per head or per output element, as the tensor's
// width says). With attention.sliding_window set, layers slide except every
// sliding_window_pattern-th one from layer 0; sliding layers run plain NeoX RoPE over
// rope.dimension_count_swa at rope.freq_base_swa, full ones the file's scaling (YaRN) over
// rope.dimension_count. The FFN is DeepSeekMoE: leading dense layers, then sigmoid-routed experts
// with the exp_probs_b selection bias plus one shared expert of expert_shared_feed_forward_length.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

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

constexpr const char* kArch = "laguna";

struct Layer {
  std::vector<float> attn_norm;  // [n_embd]
  AttentionShape shape;          // n_head is this layer's
  AttentionWeights attn;
  AttentionLayerConfig config;
  std::vector<float> ffn_norm;  // [n_embd]
};

// Which layers slide: none without a window; else all but every period-th from layer 0
// (llama.cpp's set_swa_pattern with the dense layer first; period 0: all of them).
std::vector<bool> laguna_sliding_layers(const ArchMetadata& meta, int64_t n_layer, int64_t window) {
  std::vector<bool> sliding(size_t(n_layer), false);
  if (window == 0) return sliding;
  const int64_t period = meta.checked("attention.sliding_window_pattern",
                                      meta.get_int("attention.sliding_window_pattern", 4), 0, 4096);
  for (int64_t il = 0; il < n_layer; ++il) {
    sliding[size_t(il)] = period == 0 || il % period != 0;
  }
  return sliding;
}

// The gate's width picks its form: n_head logits (one per head) or n_head*dk (one per element).
MatrixView bind_laguna_gate(WeightBinder& binder, const ModelFile& file, int64_t layer,
                            const AttentionShape& s) {
  const std::string name = layer_tensor(layer, "attn_gate.weight");
  const int64_t per_element = s.n_head * s.head_dim_k;
  const TensorInfo* info = file.find_tensor(name);
  const int64_t width = info != nullptr ? int64_t(info->ne[1]) : per_element;
  if (width != s.n_head && width != per_element) {
    fail(file.display_name(), ": ", name, " has ", width, " outputs; ", kArch, " needs ", s.n_head,
         " (one per head) or ", per_element, " (one per element)");
  }
  return binder.matrix(name, s.n_embd, width);
}

// llama.cpp's laguna graph names the roped Q and K Qcur_rope / Kcur_rope (its Qcur is the bare
// projection); the attention block's Qcur / Kcur are roped, so they are passed on under those
// names for the observer to line up with llama.cpp's eval callback.
class LagunaTraceNames final : public ActivationObserver {
 public:
  explicit LagunaTraceNames(ActivationObserver* next) : next_(next) {}
  void observe(std::string_view name, int64_t layer, const float* data, int64_t n_tokens,
               int64_t row) override {
    if (name == "Qcur") name = "Qcur_rope";
    if (name == "Kcur") name = "Kcur_rope";
    next_->observe(name, layer, data, n_tokens, row);
  }

 private:
  ActivationObserver* next_;
};

class Laguna final : public LanguageModel {
 public:
  explicit Laguna(const ModelFile& file) {
    const ArchMetadata meta(file, kArch);
    hp_ = read_decoder_hparams(meta, HeadCounts::kPerLayer);
    if (hp_.head_dim_k != hp_.head_dim_v) {
      fail(file.display_name(), ": ", kArch, " needs key_length == value_length");
    }
    moe_hp_ = read_moe_hparams(meta, hp_);
    summary_ = {kArch, hp_.n_vocab, hp_.n_embd, hp_.n_layer, hp_.n_ctx_train};

    const int64_t window = meta.checked("attention.sliding_window",
                                        meta.get_int("attention.sliding_window", 0), 0, INT32_MAX);
    const std::vector<bool> sliding = laguna_sliding_layers(meta, hp_.n_layer, window);
    // Sliding layers: plain RoPE, none of the full layers' scaling.
    const int64_t n_rot_swa =
        meta.checked("rope.dimension_count_swa",
                     meta.get_int("rope.dimension_count_swa", hp_.n_rot), 0, hp_.head_dim_k);
    const float freq_base_swa = meta.get_float("rope.freq_base_swa", hp_.rope_freq_base);
    const RopeScaling rope_scaling =
        read_rope_scaling(meta, hp_.n_ctx_train, /*deepseek_yarn=*/false);
    const std::vector<int64_t> n_heads = meta.get_per_layer("attention.head_count", hp_.n_layer);

    // The shared expert is one FFN of expert_shared_feed_forward_length (not n_ff_exp times a
    // count, as DeepSeek sizes it), so it is bound here rather than by bind_deepseek_moe.
    const int64_t n_ff_shexp =
        meta.checked("expert_shared_feed_forward_length",
                     meta.get_int("expert_shared_feed_forward_length"), 1, int64_t(1) << 20);
    MoeHParams routed_hp = moe_hp_;
    routed_hp.n_expert_shared = 0;
    const RouterConfig router = deepseek_moe_router(moe_hp_, ExpertGating::kSigmoid);

    WeightBinder binder(file);
    token_embd_ = binder.matrix("token_embd.weight", hp_.n_embd, hp_.n_vocab);
    head_ = bind_output_head(binder, token_embd_, hp_.n_embd, hp_.n_vocab);
    expert_layout_.files = binder.files();
    expert_layout_.layers.resize(size_t(hp_.n_layer));
    expert_layout_.n_expert_used = moe_hp_.n_expert_used;
    layers_.resize(size_t(hp_.n_layer));
    ffn_.resize(size_t(hp_.n_layer));
    max_shape_ = {hp_.n_embd, 0, hp_.n_head_kv, hp_.head_dim_k, hp_.head_dim_v, hp_.rms_eps};
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      Layer& l = layers_[size_t(il)];
      const int64_t n_head =
          meta.checked("attention.head_count", n_heads[size_t(il)], hp_.n_head_kv, 4096);
      if (n_head % hp_.n_head_kv != 0) meta.checked("attention.head_count_kv", -1, 1, n_head);
      l.shape = {hp_.n_embd, n_head, hp_.n_head_kv, hp_.head_dim_k, hp_.head_dim_v, hp_.rms_eps};
      max_shape_.n_head = std::max(max_shape_.n_head, n_head);

      l.attn_norm = binder.vector(layer_tensor(il, "attn_norm.weight"), hp_.n_embd);
      l.attn = bind_attention(binder, il, l.shape, /*with_gate=*/false);
      if (l.attn.q_norm.empty() || l.attn.k_norm.empty()) {
        fail(file.display_name(), ": ", kArch, " needs blk.", il, ".attn_{q,k}_norm.weight");
      }
      l.attn.gate = bind_laguna_gate(binder, file, il, l.shape);
      l.attn.gate_act = OutputGate::kSoftplus;

      const bool slides = sliding[size_t(il)];
      if (slides) {
        l.config.rope = {RopeStyle::kNeox, n_rot_swa, freq_base_swa, 1.0f, nullptr};
      } else {
        l.config.rope = {RopeStyle::kNeox, hp_.n_rot, hp_.rope_freq_base, 1.0f, nullptr};
        apply_rope_scaling(rope_scaling, l.config.rope);
      }
      l.config.window = slides ? window : 0;
      l.config.scale = 1.0f / std::sqrt(float(hp_.head_dim_k));

      l.ffn_norm = binder.vector(layer_tensor(il, "ffn_norm.weight"), hp_.n_embd);
      DeepSeekMoeWeights& ffn = ffn_[size_t(il)];
      ffn = bind_deepseek_moe(binder, il, hp_.n_embd, hp_.n_ff, routed_hp, router, expert_layout_);
      if (ffn.is_moe) {
        ffn.shared.gate =
            binder.matrix(layer_tensor(il, "ffn_gate_shexp.weight"), hp_.n_embd, n_ff_shexp);
        ffn.shared.up =
            binder.matrix(layer_tensor(il, "ffn_up_shexp.weight"), hp_.n_embd, n_ff_shexp);
        ffn.shared.down =
            binder.matrix(layer_tensor(il, "ffn_down_shexp.weight"), n_ff_shexp, hp_.n_embd);
      }
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

  void reserve(int64_t n_batch) override {
    if (!stream_.grow(n_batch, hp_.n_embd)) return;
    attn_scratch_.reserve(max_shape_, n_batch);
    ffn_scratch_.reserve(ffn_, hp_.n_embd, n_batch);
  }

  void forward(Backend& backend, const ForwardRequest& request) override {
    const int64_t n = int64_t(request.tokens.size());
    const int64_t n_embd = hp_.n_embd;
    LagunaTraceNames names(request.observer);
    const Trace trace{request.observer != nullptr ? &names : nullptr, n};
    float* x = stream_.x.data();
    backend.get_rows(token_embd_, request.tokens.data(), n, x);
    trace("inp_embd", -1, x, n_embd);
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      const Layer& l = layers_[size_t(il)];
      const DeepSeekMoeWeights& ffn = ffn_[size_t(il)];
      backend.rms_norm(x, l.attn_norm.data(), stream_.xn.data(), n, n_embd, hp_.rms_eps);
      trace("attn_norm", il, stream_.xn.data(), n_embd);
      self_attention(backend, l.attn, l.shape, l.config, request.sequences, il, stream_.xn.data(),
                     n, attn_scratch_, stream_.branch.data(), trace);
      backend.add(x, stream_.branch.data(), n * n_embd);
      trace("ffn_inp", il, x, n_embd);
      backend.rms_norm(x, l.ffn_norm.data(), stream_.xn.data(), n, n_embd, hp_.rms_eps);
      trace("ffn_norm", il, stream_.xn.data(), n_embd);
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
  AttentionShape max_shape_;  // the most heads of any layer: the scratch's size
  MatrixView token_embd_;     // [n_embd, n_vocab]
  OutputHead head_;
  std::vector<Layer> layers_;
  std::vector<DeepSeekMoeWeights> ffn_;  // [n_layer]

  ResidualStream stream_;
  AttentionScratch attn_scratch_;
  DeepSeekMoeScratch ffn_scratch_;
};

}  // namespace

std::unique_ptr<LanguageModel> make_laguna(const ModelFile& file) {
  return std::make_unique<Laguna>(file);
}

}  // namespace sluice::model
