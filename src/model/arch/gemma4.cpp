// gemma4 (Gemma 4 text, dense and MoE), as llama.cpp builds LLM_ARCH_GEMMA4: sandwich-normed
// layers; sliding-window layers (attention.sliding_window_pattern) with their own head size, RoPE
// width and base (the *_swa keys) between global ones whose RoPE takes rope_freqs.weight as
// proportional factors; per-layer head_count_kv and feed_forward_length; Q/K norms with weights,
// V normed without, attention scale 1; GeGLU; a per-layer layer_output_scale; logits soft-capped.
// The last attention.shared_kv_layers layers compute no K/V and read the cache of the last earlier
// layer of their kind. Small models add per-layer input embeddings; MoE layers run a dense FFN and
// a routed MoE side by side, the router reading the unweighted-normed residual stream.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "model/arch/architectures.h"
#include "model/blocks/attention.h"
#include "model/blocks/ffn.h"
#include "model/blocks/moe_ffn.h"
#include "model/blocks/output_head.h"
#include "model/blocks/per_layer_embedding.h"
#include "model/blocks/residual_stream.h"
#include "model/hparams.h"

namespace sluice::model {
namespace {

constexpr const char* kArch = "gemma4";

// The MoE half of a Gemma 4 MoE layer: its own norms around the experts and the router's input
// scale (the dense FFN beside it keeps ffn_norm / post_ffw_norm_1).
struct MoeBranch {
  std::vector<float> post_norm_1;   // [n_embd] post_ffw_norm_1: the dense FFN's output
  std::vector<float> pre_norm_2;    // [n_embd] pre_ffw_norm_2: the experts' input
  std::vector<float> post_norm_2;   // [n_embd] post_ffw_norm_2: the experts' output
  std::vector<float> router_scale;  // [n_embd] ffn_gate_inp.scale
  std::vector<float> spec_norm;     // [n_embd] router_scale / sqrt(n_embd), for speculation
  MoeFfnWeights experts;
};

struct Layer {
  std::vector<float> attn_norm, attn_post_norm;  // [n_embd]
  AttentionShape shape;
  AttentionWeights attn;
  AttentionLayerConfig config;
  std::vector<float> ffn_norm, ffn_post_norm;  // [n_embd]
  GluFfnWeights ffn;
  bool moe = false;
  MoeBranch branch;
  float out_scale = 1.0f;  // layer_output_scale.weight; 1 when absent
};

// Hyper-parameters beyond DecoderHParams: Gemma 4 varies them per layer.
struct Gemma4HParams {
  int64_t n_vocab = 0, n_embd = 0, n_layer = 0, n_ctx_train = 0;
  float rms_eps = 1e-6f;
  std::vector<int64_t> n_head, n_head_kv, n_ff;  // [n_layer]
  std::vector<bool> sliding;                     // [n_layer]
  int64_t window = 0;
  int64_t head_dim = 0, head_dim_swa = 0;  // keys and values alike
  int64_t n_rot = 0, n_rot_swa = 0;
  float freq_base = 1e6f, freq_base_swa = 1e4f, freq_scale = 1.0f;
  int64_t n_layer_kv = 0;  // layers with a K/V cache of their own: the first n_layer_kv
  int64_t n_embd_per_layer = 0;
  float final_softcap = 0.0f;
};

Gemma4HParams read_gemma4_hparams(const ArchMetadata& meta) {
  constexpr int64_t kMaxDim = int64_t(1) << 20;
  Gemma4HParams hp;
  hp.n_embd = meta.checked("embedding_length", meta.get_int("embedding_length"), 1, kMaxDim);
  hp.n_layer = meta.checked("block_count", meta.get_int("block_count"), 1, 4096);
  hp.n_ctx_train =
      meta.checked("context_length", meta.get_int("context_length", 4096), 1, int64_t(1) << 30);
  hp.rms_eps = meta.get_float("attention.layer_norm_rms_epsilon", 1e-6f);
  hp.n_head = meta.get_per_layer("attention.head_count", hp.n_layer);
  hp.n_head_kv = meta.find_per_layer("attention.head_count_kv", hp.n_layer).value_or(hp.n_head);
  hp.n_ff = meta.get_per_layer("feed_forward_length", hp.n_layer);
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const size_t i = size_t(il);
    meta.checked("attention.head_count", hp.n_head[i], 1, 4096);
    meta.checked("attention.head_count_kv", hp.n_head_kv[i], 1, hp.n_head[i]);
    if (hp.n_head[i] % hp.n_head_kv[i] != 0) meta.checked("attention.head_count_kv", -1, 1, 0);
    meta.checked("feed_forward_length", hp.n_ff[i], 1, kMaxDim);
  }
  hp.window = meta.checked("attention.sliding_window", meta.get_int("attention.sliding_window"), 1,
                           INT32_MAX);
  const std::vector<int64_t> pattern =
      meta.get_per_layer("attention.sliding_window_pattern", hp.n_layer);
  for (int64_t v : pattern) hp.sliding.push_back(v != 0);

  // llama.cpp requires keys and values of one size, per kind of layer.
  hp.head_dim = meta.checked("attention.key_length", meta.get_int("attention.key_length"), 1, 1024);
  hp.head_dim_swa = meta.checked("attention.key_length_swa",
                                 meta.get_int("attention.key_length_swa", hp.head_dim), 1, 1024);
  meta.checked("attention.value_length", meta.get_int("attention.value_length", hp.head_dim),
               hp.head_dim, hp.head_dim);
  meta.checked("attention.value_length_swa",
               meta.get_int("attention.value_length_swa", hp.head_dim_swa), hp.head_dim_swa,
               hp.head_dim_swa);
  hp.n_rot = meta.checked("rope.dimension_count", meta.get_int("rope.dimension_count", hp.head_dim),
                          2, hp.head_dim);
  hp.n_rot_swa =
      meta.checked("rope.dimension_count_swa",
                   meta.get_int("rope.dimension_count_swa", hp.head_dim_swa), 2, hp.head_dim_swa);
  hp.freq_base = meta.get_float("rope.freq_base", 1e6f);
  hp.freq_base_swa = meta.get_float("rope.freq_base_swa", hp.freq_base);
  const float scaling = meta.get_float("rope.scaling.factor", 1.0f);
  hp.freq_scale = scaling > 0.0f ? 1.0f / scaling : 1.0f;

  const int64_t n_shared =
      meta.checked("attention.shared_kv_layers", meta.get_int("attention.shared_kv_layers", 0), 0,
                   hp.n_layer - 1);
  hp.n_layer_kv = hp.n_layer - n_shared;
  hp.n_embd_per_layer =
      meta.checked("embedding_length_per_layer_input",
                   meta.get_int("embedding_length_per_layer_input", 0), 0, kMaxDim);
  hp.final_softcap = meta.get_float("final_logit_softcapping", 0.0f);

  if (auto n_vocab = meta.find_int("vocab_size")) {
    hp.n_vocab = *n_vocab;
  } else {
    hp.n_vocab = int64_t(meta.file().tensor("token_embd.weight").ne[1]);
  }
  meta.checked("vocab_size", hp.n_vocab, 1, int64_t(1) << 24);
  return hp;
}

class Gemma4Decoder final : public LanguageModel {
 public:
  explicit Gemma4Decoder(const ModelFile& file) {
    const ArchMetadata meta(file, kArch);
    hp_ = read_gemma4_hparams(meta);
    summary_ = {kArch, hp_.n_vocab, hp_.n_embd, hp_.n_layer, hp_.n_ctx_train};
    WeightBinder binder(file);
    token_embd_ = binder.matrix("token_embd.weight", hp_.n_embd, hp_.n_vocab);
    head_ = bind_output_head(binder, token_embd_, hp_.n_embd, hp_.n_vocab);
    const bool any_global =
        std::find(hp_.sliding.begin(), hp_.sliding.end(), false) != hp_.sliding.end();
    if (any_global) rope_freqs_ = binder.vector("rope_freqs.weight", hp_.head_dim / 2);
    ple_ = bind_per_layer_embedding(binder, hp_.n_embd, hp_.n_embd_per_layer, hp_.n_layer,
                                    hp_.n_vocab);
    expert_layout_.files = binder.files();
    expert_layout_.layers.resize(size_t(hp_.n_layer));
    layers_.resize(size_t(hp_.n_layer));
    for (int64_t il = 0; il < hp_.n_layer; ++il) bind_layer(meta, binder, il);
    binder.check_all_bound();
  }

  const ModelSummary& summary() const override { return summary_; }

  // Only the first n_layer_kv layers have a cache; the shared ones read theirs.
  std::vector<KvLayerSpec> kv_layout() const override {
    std::vector<KvLayerSpec> specs;
    for (int64_t il = 0; il < hp_.n_layer_kv; ++il) {
      const Layer& l = layers_[size_t(il)];
      specs.push_back({l.shape.n_head_kv, l.shape.head_dim_k, l.shape.head_dim_v, l.config.window});
    }
    return specs;
  }

  const experts::ExpertLayout& expert_layout() const override { return expert_layout_; }
  // Every activation (the per-layer inputs and the MoE branch's rows included) is backend memory,
  // touched only by backend ops.
  bool runs_on_device() const override { return true; }
  // A MoE layer reads back unless its choice stays on the backend (moe_decode_stays_on_backend);
  // then a GPU may record the decode step.
  bool decode_reads_host(const Backend& backend, const experts::ExpertSource* experts,
                         const Backend* expert_backend) const override {
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      const Layer& l = layers_[size_t(il)];
      if (!l.moe) continue;
      if (experts == nullptr || !moe_decode_stays_on_backend(backend, l.branch.experts, *experts,
                                                             il, moe_scratch_, expert_backend)) {
        return true;
      }
    }
    return false;
  }

  void reserve(Backend& backend, int64_t n_batch) override {
    if (!stream_.grow(backend, n_batch, hp_.n_embd)) return;
    AttentionShape widest = layers_.front().shape;
    int64_t n_ff = 0;
    for (const Layer& l : layers_) {
      widest.n_head = std::max(widest.n_head, l.shape.n_head);
      widest.n_head_kv = std::max(widest.n_head_kv, l.shape.n_head_kv);
      widest.head_dim_k = std::max(widest.head_dim_k, l.shape.head_dim_k);
      widest.head_dim_v = std::max(widest.head_dim_v, l.shape.head_dim_v);
      n_ff = std::max(n_ff, l.ffn.gate.n_rows);
    }
    attn_scratch_.reserve(backend, widest, n_batch);
    ffn_scratch_.reserve(backend, n_ff, n_batch);
    if (hp_.n_embd_per_layer > 0) ple_scratch_.reserve(backend, ple_, n_batch);
    if (const Layer* moe = first_moe_layer()) {
      moe_scratch_.reserve(backend, moe->branch.experts, hp_.n_embd, n_batch);
      spec_scratch_.reserve(backend, moe->branch.experts, hp_.n_embd, n_batch);
      for (auto* buffer : {&moe_in_, &router_in_, &moe_out_}) {
        buffer->resize(backend, size_t(n_batch * hp_.n_embd));
      }
    }
  }

  void forward(Backend& backend, const ForwardRequest& request) override {
    if (first_moe_layer() != nullptr && request.experts == nullptr) {
      fail(kArch, ": MoE forward without experts");
    }
    const int64_t n = int64_t(request.tokens.size());
    const int64_t n_embd = hp_.n_embd;
    const Trace trace{request.observer, n, &backend};
    float* x = stream_.x.data();
    const int32_t* ids = stream_.token_ids(backend, request.tokens);
    backend.get_rows(token_embd_, ids, n, x);
    backend.scale(x, std::sqrt(float(n_embd)), n * n_embd);
    trace("inp_scaled", -1, x, n_embd);
    if (hp_.n_embd_per_layer > 0) {
      per_layer_inputs(backend, ple_, ids, x, n, hp_.rms_eps, ple_scratch_, trace);
    }
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      const Layer& l = layers_[size_t(il)];
      backend.rms_norm(x, l.attn_norm.data(), stream_.xn.data(), n, n_embd, hp_.rms_eps);
      trace("attn_norm", il, stream_.xn.data(), n_embd);
      self_attention(backend, l.attn, l.shape, l.config, request.sequences, il, stream_.xn.data(),
                     n, attn_scratch_, stream_.branch.data(), trace);
      backend.rms_norm(stream_.branch.data(), l.attn_post_norm.data(), stream_.branch.data(), n,
                       n_embd, hp_.rms_eps);
      backend.add(x, stream_.branch.data(), n * n_embd);
      if (l.moe) {
        dense_and_experts(backend, request, il, n, trace);
      } else {
        backend.rms_norm(x, l.ffn_norm.data(), stream_.xn.data(), n, n_embd, hp_.rms_eps);
        glu_ffn(backend, l.ffn, GluActivation::kGeluTanhF16, il, stream_.xn.data(), n, ffn_scratch_,
                stream_.branch.data(), trace);
      }
      backend.rms_norm(stream_.branch.data(), l.ffn_post_norm.data(), stream_.branch.data(), n,
                       n_embd, hp_.rms_eps);
      backend.add(x, stream_.branch.data(), n * n_embd);
      if (hp_.n_embd_per_layer > 0) {
        add_per_layer_input(backend, ple_, il, x, n, hp_.rms_eps, ple_scratch_, trace);
      }
      if (l.out_scale != 1.0f) backend.scale(x, l.out_scale, n * n_embd);
      trace("l_out", il, x, n_embd);
    }
    const LogitRows out = logit_rows(backend, request, x, n, n_embd);
    // cap * tanh(logits * (1 / cap)), multiplied in the order llama.cpp's graph does.
    LogitsFinish finish;
    if (hp_.final_softcap > 0.0f) finish = {1.0f / hp_.final_softcap, 1.0f, hp_.final_softcap};
    output_logits(backend, head_, out.x, out.n_rows, hp_.rms_eps, request.logits, stream_.logits,
                  trace, finish);
  }

 private:
  void bind_layer(const ArchMetadata& meta, WeightBinder& binder, int64_t il) {
    Layer& l = layers_[size_t(il)];
    const size_t i = size_t(il);
    const bool slides = hp_.sliding[i];
    const int64_t head_dim = slides ? hp_.head_dim_swa : hp_.head_dim;
    l.attn_norm = binder.vector(layer_tensor(il, "attn_norm.weight"), hp_.n_embd);
    l.attn_post_norm = binder.vector(layer_tensor(il, "post_attention_norm.weight"), hp_.n_embd);
    l.config.rope = {RopeStyle::kNeox, slides ? hp_.n_rot_swa : hp_.n_rot,
                     slides ? hp_.freq_base_swa : hp_.freq_base, slides ? 1.0f : hp_.freq_scale,
                     slides ? nullptr : rope_freqs_.data()};
    l.config.window = slides ? hp_.window : 0;
    l.config.scale = 1.0f;  // Q and K are normed; Gemma 4 applies no further scale
    if (il >= hp_.n_layer_kv) l.config.shared_kv_layer = shared_source(meta, il);
    const int64_t n_head_kv =
        il >= hp_.n_layer_kv ? hp_.n_head_kv[size_t(l.config.shared_kv_layer)] : hp_.n_head_kv[i];
    l.shape = {hp_.n_embd, hp_.n_head[i], n_head_kv, head_dim, head_dim, hp_.rms_eps};
    l.shape.v_norm = true;
    l.attn = bind_gemma4_attention(binder, il, l.shape, il < hp_.n_layer_kv);

    l.ffn_norm = binder.vector(layer_tensor(il, "ffn_norm.weight"), hp_.n_embd);
    l.ffn = bind_glu_ffn(binder, il, hp_.n_embd, hp_.n_ff[i]);
    l.ffn_post_norm = binder.vector(layer_tensor(il, "post_ffw_norm.weight"), hp_.n_embd);
    l.moe = binder.has(layer_tensor(il, "ffn_gate_inp.weight"));
    if (l.moe) l.branch = bind_moe_branch(meta, binder, il);
    if (auto scale = binder.optional_vector(layer_tensor(il, "layer_output_scale.weight"), 1)) {
      l.out_scale = scale->front();
    }
  }

  // As llama.cpp: a shared sliding layer reads layer n_layer_kv - 2, a shared global one layer
  // n_layer_kv - 1 — which must then be of the same kind and shape.
  int64_t shared_source(const ArchMetadata& meta, int64_t il) const {
    const int64_t source = hp_.n_layer_kv - (hp_.sliding[size_t(il)] ? 2 : 1);
    if (source < 0 || hp_.sliding[size_t(source)] != hp_.sliding[size_t(il)]) {
      fail(meta.file().display_name(), ": ", kArch, ": layer ", il,
           " would share the K/V cache of layer ", source,
           ", which is not of its kind (attention.shared_kv_layers)");
    }
    return source;
  }

  // Q, K, V and output projections with Q/K norms; layers that share another's cache compute no
  // K/V (their attn_k / attn_v / attn_k_norm, when the file has them, are unused, as in llama.cpp),
  // and a layer without attn_v takes its keys' projection as values.
  static AttentionWeights bind_gemma4_attention(WeightBinder& binder, int64_t il,
                                                const AttentionShape& s, bool own_kv) {
    AttentionWeights w;
    const int64_t q_dim = s.n_head * s.head_dim_k;
    const int64_t kv_dim = s.n_head_kv * s.head_dim_k;
    w.wq = binder.matrix(layer_tensor(il, "attn_q.weight"), s.n_embd, q_dim);
    w.wo = binder.matrix(layer_tensor(il, "attn_output.weight"), q_dim, s.n_embd);
    w.q_norm = binder.vector(layer_tensor(il, "attn_q_norm.weight"), s.head_dim_k);
    if (!own_kv) {
      for (const char* name : {"attn_k.weight", "attn_v.weight", "attn_k_norm.weight"}) {
        if (binder.has(layer_tensor(il, name))) binder.ignore(layer_tensor(il, name));
      }
      return w;
    }
    w.wk = binder.matrix(layer_tensor(il, "attn_k.weight"), s.n_embd, kv_dim);
    if (auto wv = binder.optional_matrix(layer_tensor(il, "attn_v.weight"), s.n_embd, kv_dim)) {
      w.wv = *wv;
    }
    w.k_norm = binder.vector(layer_tensor(il, "attn_k_norm.weight"), s.head_dim_k);
    return w;
  }

  MoeBranch bind_moe_branch(const ArchMetadata& meta, WeightBinder& binder, int64_t il) {
    const int64_t n_embd = hp_.n_embd;
    MoeBranch b;
    b.post_norm_1 = binder.vector(layer_tensor(il, "post_ffw_norm_1.weight"), n_embd);
    b.pre_norm_2 = binder.vector(layer_tensor(il, "pre_ffw_norm_2.weight"), n_embd);
    b.post_norm_2 = binder.vector(layer_tensor(il, "post_ffw_norm_2.weight"), n_embd);
    b.router_scale = binder.vector(layer_tensor(il, "ffn_gate_inp.scale"), n_embd);
    b.spec_norm = b.router_scale;
    for (float& v : b.spec_norm) v *= 1.0f / std::sqrt(float(n_embd));

    DecoderHParams dense;  // what read_moe_hparams needs of it
    dense.n_layer = hp_.n_layer;
    dense.n_ff = hp_.n_ff[size_t(il)];
    const MoeHParams moe = read_moe_hparams(meta, dense);
    RouterConfig router;
    router.n_expert = moe.n_expert;
    router.n_expert_used = moe.n_expert_used;
    router.gating = ExpertGating::kSoftmax;
    router.norm_weights = true;
    router.weights_scale = 1.0f;
    expert_layout_.n_expert_used = moe.n_expert_used;
    b.experts = bind_moe_ffn(binder, il, n_embd, moe.n_ff_exp, router, expert_layout_);
    b.experts.act = GluActivation::kGeluTanhF16;
    return b;
  }

  const Layer* first_moe_layer() const {
    for (const Layer& l : layers_) {
      if (l.moe) return &l;
    }
    return nullptr;
  }

  // A MoE layer's FFN into stream_.branch: post_norm_1(dense(ffn_norm(x))) +
  // post_norm_2(experts(pre_norm_2(x))), the experts chosen by a router that reads
  // rms_norm(x) / sqrt(n_embd) * ffn_gate_inp.scale.
  void dense_and_experts(Backend& backend, const ForwardRequest& request, int64_t il, int64_t n,
                         const Trace& trace) {
    const Layer& l = layers_[size_t(il)];
    const MoeBranch& b = l.branch;
    const int64_t n_embd = hp_.n_embd;
    const float* x = stream_.x.data();
    float* router_in = router_in_.data();
    backend.rms_norm(x, nullptr, router_in, n, n_embd, hp_.rms_eps);
    backend.scale(router_in, 1.0f / std::sqrt(float(n_embd)), n * n_embd);
    backend.mul_rows(router_in, b.router_scale.data(), n, n_embd);
    moe_route(backend, b.experts, *request.experts, il, router_in, n, moe_scratch_, trace,
              request.expert_backend);

    // The dense half computes while the chosen experts load.
    backend.rms_norm(x, l.ffn_norm.data(), stream_.xn.data(), n, n_embd, hp_.rms_eps);
    trace("ffn_norm_1", il, stream_.xn.data(), n_embd);
    glu_ffn(backend, l.ffn, GluActivation::kGeluTanhF16, il, stream_.xn.data(), n, ffn_scratch_,
            stream_.branch.data(), trace);
    backend.rms_norm(stream_.branch.data(), b.post_norm_1.data(), stream_.branch.data(), n, n_embd,
                     hp_.rms_eps);
    trace("ffn_mlp", il, stream_.branch.data(), n_embd);

    if (const Layer* next = il + 1 < hp_.n_layer ? &layers_[size_t(il + 1)] : nullptr;
        next != nullptr && next->moe) {
      moe_prefetch(backend, next->branch.experts, next->branch.spec_norm, hp_.rms_eps,
                   *request.experts, il + 1, x, n, n_embd, spec_scratch_);
    }
    backend.rms_norm(x, b.pre_norm_2.data(), moe_in_.data(), n, n_embd, hp_.rms_eps);
    trace("ffn_norm_2", il, moe_in_.data(), n_embd);
    moe_compute(backend, b.experts, *request.experts, il, moe_in_.data(), n, n_embd, moe_scratch_,
                moe_out_.data(), trace, request.expert_backend);
    backend.rms_norm(moe_out_.data(), b.post_norm_2.data(), moe_out_.data(), n, n_embd,
                     hp_.rms_eps);
    trace("ffn_moe", il, moe_out_.data(), n_embd);
    backend.add(stream_.branch.data(), moe_out_.data(), n * n_embd);
    trace("ffn_moe_combined", il, stream_.branch.data(), n_embd);
  }

  Gemma4HParams hp_;
  ModelSummary summary_;
  experts::ExpertLayout expert_layout_;
  MatrixView token_embd_;  // [n_embd, n_vocab]
  OutputHead head_;
  std::vector<float> rope_freqs_;  // [head_dim / 2] the global layers' frequency divisors
  PerLayerEmbeddingWeights ple_;
  std::vector<Layer> layers_;

  ResidualStream stream_;
  AttentionScratch attn_scratch_;
  FfnScratch ffn_scratch_;
  PerLayerEmbeddingScratch ple_scratch_;
  MoeScratch moe_scratch_;
  MoeScratch spec_scratch_;
  BackendArray<float> moe_in_, router_in_, moe_out_;  // [n_batch, n_embd] MoE layers only
};

}  // namespace

std::unique_ptr<LanguageModel> make_gemma4(const ModelFile& file) {
  return std::make_unique<Gemma4Decoder>(file);
}

}  // namespace sluice::model
