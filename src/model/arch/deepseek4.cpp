// deepseek4 (DeepSeek V4): a residual of hyper_connection.count streams (blocks/
// hyper_connections) around every attention and FFN; single-latent attention — queries through
// attn_q_a, its norm and attn_q_b, each head RMS-normed without weight; one key head that is
// also the value (attn_kv, its norm); interleaved RoPE on the last n_rot dimensions, undone on
// the output, which leaves through a grouped low-rank projection (attn_output_a per group of
// heads, then attn_output_b) — over a sliding window of raw keys plus, per compress_ratios,
// compressed keys (blocks/kv_compressor): every block of 128 tokens (all of them attended), or
// overlapping blocks of 4, of which a lightning indexer over its own compressed keys keeps the
// top_k. Compressed layers rotate with compress_rope_freq_base and YaRN, the others with the
// plain base. Heads attend with per-head sinks. The FFN is routed experts with sqrt(softplus)
// scores (exp_probs_b for the choice), normalised and scaled weights, clamped SwiGLU, plus a
// clamped shared expert; the first hash_layer_count layers take their experts from the token
// id (ffn_gate_tid2eid) instead of the scores. Every step is a backend op on backend memory
// (runs_on_device): the hyper-connections and the compressor through their own ops, each
// query row's keys — its window of raw cells and its chosen compressed ones — gathered by
// Backend::copy / gather_key_cells, the indexer's choice by indexer_scores + top_k_positions.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "backend/backend_array.h"
#include "core/error.h"
#include "model/arch/architectures.h"
#include "model/blocks/ffn.h"
#include "model/blocks/hyper_connections.h"
#include "model/blocks/kv_compressor.h"
#include "model/blocks/moe_ffn.h"
#include "model/blocks/output_head.h"
#include "model/hparams.h"
#include "model/rope_scaling.h"

namespace sluice::model {
namespace {

constexpr int64_t kOverlapRatio = 4;  // compressed with an indexer
constexpr int64_t kHeavyRatio = 128;  // compressed, every block attended

struct Shape {
  int64_t n_embd = 0, n_head = 0, head_dim = 0, n_rot = 0, q_lora = 0;
  int64_t window = 0, n_group = 0, o_lora = 0;
  int64_t indexer_heads = 0, indexer_dim = 0, top_k = 0;
  float eps = 1e-6f;
  int64_t group_dim() const { return n_head / n_group * head_dim; }
};

struct Layer {
  HyperConnectionWeights hc_attn, hc_ffn;
  std::vector<float> attn_norm, sinks, q_a_norm, kv_norm, ffn_norm;
  MatrixView wq_a, wq_b, wkv, wo_a, wo_b;
  int64_t ratio = 0;
  std::optional<KvCompressorWeights> compressor;
  int64_t state_kv = -1, keys_kv = -1;  // the compressor's KV layers
  // The indexer of an overlapping layer.
  MatrixView indexer_q_b, indexer_proj;
  std::optional<KvCompressorWeights> indexer_compressor;
  int64_t indexer_state_kv = -1, indexer_keys_kv = -1;
  MoeFfnWeights moe;
  GluFfnWeights shared;
  float shared_limit = 0.0f;
  std::vector<int32_t> hash;  // [n_vocab, n_expert_used] when hash-routed
};

// A float per layer, given as one number or an array.
std::vector<float> float_per_layer(const ModelFile& file, const std::string& key, int64_t n_layer,
                                   float fallback) {
  std::vector<float> values(size_t(n_layer), fallback);
  const MetaValue* value = file.find(key);
  if (value == nullptr) return values;
  if (!value->is_array()) {
    std::fill(values.begin(), values.end(), file.get_f32(key));
    return values;
  }
  if (int64_t(value->array_length()) < n_layer) fail(key, ": fewer entries than layers");
  for (int64_t i = 0; i < n_layer; ++i) values[size_t(i)] = float(value->element_as_double(i));
  return values;
}

// Activations in backend memory; the routing's host lists on the host.
struct Scratch {
  BackendArray<float> streams;  // [n, hc, n_embd]
  BackendArray<float> x, xn, branch, shared;
  BackendArray<float> qr, q, kv, out, oa;
  BackendArray<float> iq, iw;
  BackendArray<float> scores;          // [n_visible] one row's indexer scores (grown on demand)
  BackendArray<int32_t> chosen;        // [top_k] one row's chosen blocks
  BackendArray<uint8_t> gathered;      // one row's key cells (grown on demand)
  BackendArray<int32_t> group_ids;     // [n_batch * n_group] 0, 1, … n_group - 1, repeated
  BackendArray<int32_t> token_ids;     // [n_batch] the chunk's tokens, for get_rows
  BackendArray<float> rope, reversed;  // rotary parts of every head of every row
  BackendArray<float> logits;          // output_logits' scratch
  std::vector<int32_t> hash, reverse_rows;
  HyperConnectionScratch hc;
  KvCompressorScratch compressor, indexer_compressor;
  MoeScratch moe;
  FfnScratch ffn;
};

class DeepSeek4 final : public LanguageModel {
 public:
  explicit DeepSeek4(const ModelFile& file) {
    const ArchMetadata meta(file, "deepseek4");
    hp_ = read_decoder_hparams(meta);
    read_moe(meta);
    summary_ = {"deepseek4", hp_.n_vocab, hp_.n_embd, hp_.n_layer, hp_.n_ctx_train};
    read_shape(meta);
    set_rope(meta);
    bind(file);
  }

  const ModelSummary& summary() const override { return summary_; }
  std::vector<KvLayerSpec> kv_layout() const override { return kv_layout_; }
  const experts::ExpertLayout& expert_layout() const override { return expert_layout_; }
  bool runs_on_device() const override { return true; }

  void reserve(Backend& backend, int64_t n_batch) override {
    if (n_batch <= n_batch_) return;
    n_batch_ = n_batch;
    const Shape& s = shape_;
    const auto rows = [&](BackendArray<float>& v, int64_t width) {
      v.resize(backend, size_t(n_batch * std::max<int64_t>(width, 1)));
    };
    rows(m_.streams, hc_.n_stream * s.n_embd);
    rows(m_.x, s.n_embd);
    rows(m_.xn, s.n_embd);
    rows(m_.branch, s.n_embd);
    rows(m_.shared, s.n_embd);
    rows(m_.qr, s.q_lora);
    rows(m_.q, s.n_head * s.head_dim);
    rows(m_.kv, s.head_dim);
    rows(m_.out, s.n_head * s.head_dim);
    rows(m_.oa, s.n_group * s.o_lora);
    rows(m_.iq, s.indexer_heads * s.indexer_dim);
    rows(m_.iw, s.indexer_heads);
    const int64_t rope_heads = std::max(s.n_head, s.indexer_heads);
    rows(m_.rope, rope_heads * s.n_rot);
    rows(m_.reversed, rope_heads * s.n_rot);
    m_.chosen.resize(backend, size_t(std::max<int64_t>(s.top_k, 1)));
    m_.token_ids.resize(backend, size_t(n_batch));
    std::vector<int32_t> ids(size_t(n_batch * s.n_group));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(int64_t(i) % s.n_group);
    m_.group_ids.resize(backend, ids.size());
    backend.upload(m_.group_ids.data(), ids.data(), ids.size() * sizeof(int32_t));
    m_.hash.resize(size_t(n_batch * moe_hp_.n_expert_used));
    m_.hc.reserve(backend, hc_, n_batch);
    m_.compressor.reserve(backend, {s.n_embd, s.head_dim, kOverlapRatio, s.n_rot, s.eps}, n_batch);
    m_.indexer_compressor.reserve(
        backend, {s.n_embd, std::max<int64_t>(s.indexer_dim, 1), kOverlapRatio, s.n_rot, s.eps},
        n_batch);
    m_.ffn.reserve(backend, moe_hp_.n_ff_exp * std::max<int64_t>(moe_hp_.n_expert_shared, 1),
                   n_batch);
    m_.moe.reserve(backend, layers_.front().moe, s.n_embd, n_batch);
  }

  void forward(Backend& backend, const ForwardRequest& request) override {
    const int64_t n = int64_t(request.tokens.size());
    const int64_t d = shape_.n_embd, hc = hc_.n_stream;
    const Trace trace{request.observer, n, &backend};
    float* streams = m_.streams.data();
    float* x = m_.x.data();
    float* xn = m_.xn.data();
    float* branch = m_.branch.data();
    backend.upload(m_.token_ids.data(), request.tokens.data(), request.tokens.size_bytes());
    backend.get_rows(token_embd_, m_.token_ids.data(), n, x);
    trace("inp_embd", -1, x, d);
    for (int64_t h = 0; h < hc; ++h) backend.copy_strided_rows(x, d, streams + h * d, hc * d, n, d);
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      const Layer& layer = layers_[size_t(il)];
      hc_pre(backend, layer.hc_attn, hc_, streams, n, m_.hc, x, "hc_attn_pre", il, trace);
      backend.rms_norm(x, layer.attn_norm.data(), xn, n, d, hp_.rms_eps);
      trace("attn_norm", il, xn, d);
      attention(backend, layer, il, request.sequences, n, trace);
      hc_post(backend, hc_, branch, n, m_.hc, streams);
      trace("hc_attn_post", il, streams, hc * d);

      hc_pre(backend, layer.hc_ffn, hc_, streams, n, m_.hc, x, "hc_ffn_pre", il, trace);
      backend.rms_norm(x, layer.ffn_norm.data(), xn, n, d, hp_.rms_eps);
      trace("ffn_norm", il, xn, d);
      ffn(backend, layer, il, request, n, trace);
      hc_post(backend, hc_, branch, n, m_.hc, streams);
      trace("l_out", il, streams, hc * d);
    }
    hc_head(backend, head_hc_, hc_, streams, n, m_.hc, x);
    trace("hc_head", -1, x, d);
    const LogitRows out = logit_rows(backend, request, x, n, d);
    output_logits(backend, head_, out.x, out.n_rows, hp_.rms_eps, request.logits, m_.logits, trace);
  }

 private:
  // The MoE keys (read_moe_hparams knows no gating function 4).
  void read_moe(const ArchMetadata& meta) {
    MoeHParams& moe = moe_hp_;
    moe.n_expert = meta.checked("expert_count", meta.get_int("expert_count"), 1, 1 << 16);
    moe.n_expert_used =
        meta.checked("expert_used_count", meta.get_int("expert_used_count"), 1, moe.n_expert);
    moe.n_ff_exp = meta.checked("expert_feed_forward_length",
                                meta.get_int("expert_feed_forward_length"), 1, 1 << 20);
    moe.n_expert_shared =
        meta.checked("expert_shared_count", meta.get_int("expert_shared_count"), 1, 1 << 10);
    moe.weights_scale = meta.get_float("expert_weights_scale", 0.0f);
    if (const MetaValue* norm = meta.file().find("deepseek4.expert_weights_norm")) {
      moe.weights_norm = norm->as<bool>();
    }
    moe.gating_func = meta.checked("expert_gating_func", meta.get_int("expert_gating_func"), 4, 4);
  }

  void read_shape(const ArchMetadata& meta) {
    Shape& s = shape_;
    s.n_embd = hp_.n_embd;
    s.n_head = hp_.n_head;
    s.head_dim = hp_.head_dim_k;
    s.n_rot = hp_.n_rot;
    s.eps = hp_.rms_eps;
    meta.checked("attention.head_count_kv", hp_.n_head_kv, 1, 1);
    meta.checked("attention.value_length", hp_.head_dim_v, s.head_dim, s.head_dim);
    s.q_lora =
        meta.checked("attention.q_lora_rank", meta.get_int("attention.q_lora_rank"), 1, 1 << 16);
    s.window = meta.checked("attention.sliding_window", meta.get_int("attention.sliding_window"), 1,
                            int64_t(1) << 30);
    s.n_group = meta.checked("attention.output_group_count",
                             meta.get_int("attention.output_group_count"), 1, s.n_head);
    if (s.n_head % s.n_group != 0) meta.checked("attention.output_group_count", -1, 1, 0);
    s.o_lora = meta.checked("attention.output_lora_rank",
                            meta.get_int("attention.output_lora_rank"), 1, 1 << 16);
    s.indexer_heads = meta.get_int("attention.indexer.head_count", 0);
    s.indexer_dim = meta.get_int("attention.indexer.key_length", 0);
    s.top_k = meta.get_int("attention.indexer.top_k", 0);
    hc_.n_embd = s.n_embd;
    hc_.n_stream =
        meta.checked("hyper_connection.count", meta.get_int("hyper_connection.count"), 1, 64);
    hc_.sinkhorn_iterations =
        meta.checked("hyper_connection.sinkhorn_iterations",
                     meta.get_int("hyper_connection.sinkhorn_iterations"), 1, 1000);
    hc_.eps = meta.get_float("hyper_connection.epsilon");
    hc_.norm_eps = hp_.rms_eps;
    ratios_ = meta.get_per_layer("attention.compress_ratios", hp_.n_layer);
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      const int64_t r = ratios_[size_t(il)];
      if (r != 0 && r != kOverlapRatio && r != kHeavyRatio) {
        meta.checked("attention.compress_ratios", r, 0, 0);
      }
      if (r == kOverlapRatio && (s.indexer_heads <= 0 || s.indexer_dim < s.n_rot || s.top_k <= 0)) {
        fail(meta.file().display_name(), ": deepseek4: a layer of compress ratio 4 needs ",
             "attention.indexer.{head_count,key_length,top_k}");
      }
    }
    n_hash_ = meta.checked("hash_layer_count", meta.get_int("hash_layer_count", 0), 0, hp_.n_layer);
  }

  // Plain RoPE on the uncompressed layers; compress_rope_freq_base with the file's YaRN on the
  // compressed ones, whose attention factor cancels YaRN's own magnitude correction.
  void set_rope(const ArchMetadata& meta) {
    const RopeScaling scaling = read_rope_scaling(meta, hp_.n_ctx_train, /*deepseek_yarn=*/false);
    rope_ = {RopeStyle::kNormal, shape_.n_rot, hp_.rope_freq_base, 1.0f, nullptr};
    compress_rope_ = rope_;
    compress_rope_.freq_base = meta.get_float("attention.compress_rope_freq_base");
    apply_rope_scaling(scaling, compress_rope_);
    compress_rope_.attn_factor =
        compress_rope_.ext_factor == 0.0f
            ? 1.0f
            : 1.0f / (1.0f + 0.1f * std::log(1.0f / compress_rope_.freq_scale));
  }

  void bind(const ModelFile& file) {
    const Shape& s = shape_;
    WeightBinder binder(file);
    token_embd_ = binder.matrix("token_embd.weight", s.n_embd, hp_.n_vocab);
    head_ = bind_output_head(binder, token_embd_, s.n_embd, hp_.n_vocab);
    head_hc_ = bind_hyper_connection(binder, "output_hc", hc_, /*head=*/true);
    RouterConfig router;
    router.n_expert = moe_hp_.n_expert;
    router.n_expert_used = moe_hp_.n_expert_used;
    router.gating = ExpertGating::kSqrtSoftplus;
    router.norm_weights = moe_hp_.weights_norm.value_or(true);
    router.weights_scale = moe_hp_.weights_scale;
    const std::vector<float> limit =
        float_per_layer(file, "deepseek4.swiglu_clamp_exp", hp_.n_layer, 0.0f);
    const std::vector<float> shared_limit =
        float_per_layer(file, "deepseek4.swiglu_clamp_shexp", hp_.n_layer, -1.0f);
    expert_layout_.files = binder.files();
    expert_layout_.layers.resize(size_t(hp_.n_layer));
    expert_layout_.n_expert_used = moe_hp_.n_expert_used;
    kv_layout_.assign(size_t(hp_.n_layer), KvLayerSpec{1, s.head_dim, 0, s.window});
    layers_.resize(size_t(hp_.n_layer));
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      Layer& l = layers_[size_t(il)];
      const auto name = [&](const char* suffix) { return layer_tensor(il, suffix); };
      l.hc_attn = bind_hyper_connection(binder, name("hc_attn"), hc_, false);
      l.hc_ffn = bind_hyper_connection(binder, name("hc_ffn"), hc_, false);
      l.attn_norm = binder.vector(name("attn_norm.weight"), s.n_embd);
      l.sinks = binder.vector(name("attn_sinks.weight"), s.n_head);
      l.wq_a = binder.matrix(name("attn_q_a.weight"), s.n_embd, s.q_lora);
      l.q_a_norm = binder.vector(name("attn_q_a_norm.weight"), s.q_lora);
      l.wq_b = binder.matrix(name("attn_q_b.weight"), s.q_lora, s.n_head * s.head_dim);
      l.wkv = binder.matrix(name("attn_kv.weight"), s.n_embd, s.head_dim);
      l.kv_norm = binder.vector(name("attn_kv_a_norm.weight"), s.head_dim);
      l.wo_a = binder.matrix(name("attn_output_a.weight"), s.group_dim(), s.o_lora * s.n_group);
      l.wo_b = binder.matrix(name("attn_output_b.weight"), s.n_group * s.o_lora, s.n_embd);
      l.ratio = ratios_[size_t(il)];
      if (l.ratio != 0) {
        const KvCompressorShape cs = compressor_shape(s.head_dim, l.ratio);
        l.compressor = bind_kv_compressor(binder, il, "attn_compressor", cs);
        l.state_kv = add_kv(cs.state_spec());
        l.keys_kv = add_kv(cs.keys_spec());
      }
      if (l.ratio == kOverlapRatio) {
        const KvCompressorShape cs = compressor_shape(s.indexer_dim, l.ratio);
        l.indexer_q_b = binder.matrix(name("indexer.attn_q_b.weight"), s.q_lora,
                                      s.indexer_heads * s.indexer_dim);
        l.indexer_proj = binder.matrix(name("indexer.proj.weight"), s.n_embd, s.indexer_heads);
        l.indexer_compressor = bind_kv_compressor(binder, il, "indexer_compressor", cs);
        l.indexer_state_kv = add_kv(cs.state_spec());
        l.indexer_keys_kv = add_kv(cs.keys_spec());
      }
      l.ffn_norm = binder.vector(name("ffn_norm.weight"), s.n_embd);
      l.moe = bind_moe_ffn(binder, il, s.n_embd, moe_hp_.n_ff_exp, router, expert_layout_);
      l.moe.swiglu_limit = limit[size_t(il)] > 1e-6f ? limit[size_t(il)] : 0.0f;
      const float sl =
          shared_limit[size_t(il)] < 0.0f ? limit[size_t(il)] : shared_limit[size_t(il)];
      l.shared_limit = sl > 1e-6f ? sl : 0.0f;
      const int64_t n_ff_shared = moe_hp_.n_ff_exp * moe_hp_.n_expert_shared;
      l.shared.gate = binder.matrix(name("ffn_gate_shexp.weight"), s.n_embd, n_ff_shared);
      l.shared.up = binder.matrix(name("ffn_up_shexp.weight"), s.n_embd, n_ff_shared);
      l.shared.down = binder.matrix(name("ffn_down_shexp.weight"), n_ff_shared, s.n_embd);
      if (il < n_hash_) bind_hash(file, binder, il, l);
    }
    binder.ignore_layers_from(hp_.n_layer);
    binder.check_all_bound();
  }

  KvCompressorShape compressor_shape(int64_t head_dim, int64_t ratio) const {
    return {shape_.n_embd, head_dim, ratio, shape_.n_rot, shape_.eps};
  }

  int64_t add_kv(const KvLayerSpec& spec) {
    kv_layout_.push_back(spec);
    return int64_t(kv_layout_.size()) - 1;
  }

  // ffn_gate_tid2eid [n_expert_used, n_vocab] I32: each token's experts.
  void bind_hash(const ModelFile& file, WeightBinder& binder, int64_t il, Layer& l) {
    const std::string name = layer_tensor(il, "ffn_gate_tid2eid.weight");
    const TensorInfo& info = file.tensor(name);
    const int64_t k = moe_hp_.n_expert_used;
    if (info.type != QType::I32 || info.n_dims != 2 || int64_t(info.ne[0]) != k ||
        int64_t(info.ne[1]) != hp_.n_vocab) {
      fail(name, ": expected I32 [", k, ", ", hp_.n_vocab, "]");
    }
    const std::span<const uint8_t> bytes = file.tensor_bytes(info);
    l.hash.resize(size_t(k * hp_.n_vocab));
    std::memcpy(l.hash.data(), bytes.data(), l.hash.size() * sizeof(int32_t));
    for (int32_t e : l.hash) {
      if (e < 0 || e >= moe_hp_.n_expert) fail(name, ": expert id ", e, " out of range");
    }
    binder.ignore(name);
  }

  void attention(Backend& backend, const Layer& l, int64_t il,
                 std::span<const SequenceRun> sequences, int64_t n, const Trace& trace) {
    const Shape& s = shape_;
    const int64_t hd = s.head_dim, nh = s.n_head;
    const RopeConfig& rope = l.ratio != 0 ? compress_rope_ : rope_;
    float* xn = m_.xn.data();
    float* qr = m_.qr.data();
    float* q = m_.q.data();
    float* kv = m_.kv.data();
    float* out = m_.out.data();
    backend.matmul(l.wq_a, xn, qr, n);
    backend.rms_norm(qr, l.q_a_norm.data(), qr, n, s.q_lora, s.eps);
    trace("qr_norm", il, qr, s.q_lora);
    backend.matmul(l.wq_b, qr, q, n);
    backend.rms_norm(q, nullptr, q, n * nh, hd, s.eps);
    backend.matmul(l.wkv, xn, kv, n);
    backend.rms_norm(kv, l.kv_norm.data(), kv, n, hd, s.eps);
    for (const SequenceRun& run : sequences) {
      rope_tail(backend, q + run.row0 * nh * hd, run.n_tokens, nh, hd, run.pos0, rope,
                m_.rope.data());
      rope_tail(backend, kv + run.row0 * hd, run.n_tokens, 1, hd, run.pos0, rope, m_.rope.data());
      // A key-only layer (its keys are the values too): no value columns to write.
      const float* rows = kv + run.row0 * hd;
      backend.kv_store(run.kv->layer(il), rows, rows, run.n_tokens, run.pos0);
    }
    trace("q", il, q, nh * hd);
    trace("kv", il, kv, hd);
    if (l.ratio != 0) {
      kv_compress(backend, *l.compressor, compressor_shape(hd, l.ratio), compress_rope_, sequences,
                  l.state_kv, l.keys_kv, xn, n, m_.compressor);
    }
    if (l.ratio == kOverlapRatio) {
      kv_compress(backend, *l.indexer_compressor, compressor_shape(s.indexer_dim, l.ratio),
                  compress_rope_, sequences, l.indexer_state_kv, l.indexer_keys_kv, xn, n,
                  m_.indexer_compressor);
      const int64_t ih = s.indexer_heads, id = s.indexer_dim;
      backend.matmul(l.indexer_q_b, qr, m_.iq.data(), n);
      for (const SequenceRun& run : sequences) {
        rope_tail(backend, m_.iq.data() + run.row0 * ih * id, run.n_tokens, ih, id, run.pos0,
                  compress_rope_, m_.rope.data());
      }
      backend.matmul(l.indexer_proj, xn, m_.iw.data(), n);
      backend.scale(m_.iw.data(), 1.0f / std::sqrt(float(id * ih)), n * ih);
    }
    const float scale = 1.0f / std::sqrt(float(hd));
    for (const SequenceRun& run : sequences) {
      for (int64_t t = 0; t < run.n_tokens; ++t) {
        attend_row(backend, l, il, run, t, scale);
      }
    }
    // The rotation undone on the output's rotary part, then the grouped low-rank projection.
    for (const SequenceRun& run : sequences) {
      derope(backend, out + run.row0 * nh * hd, run.n_tokens, run.pos0, rope);
    }
    trace("attn_derope", il, out, nh * hd);
    // Each (token, group) row of `out` through its group's rows of attn_output_a: one product
    // of the groups as a stack (each row's numbers those of a one-row matmul; the tiny files'
    // logits did not move from the matmul per group this replaced).
    const int64_t gd = s.group_dim();
    const size_t row_bytes = size_t(*sluice::row_bytes(l.wo_a.type, uint64_t(gd)));
    const ExpertStack groups{l.wo_a.type, l.wo_a.data, int64_t(row_bytes) * s.o_lora,
                             s.n_group,   gd,          s.o_lora};
    backend.matmul_experts(groups, m_.group_ids.data(), n * s.n_group, out, false, m_.oa.data());
    backend.matmul(l.wo_b, m_.oa.data(), m_.branch.data(), n);
    trace("attn_out", il, m_.branch.data(), s.n_embd);
  }

  // Rotates the rotary tails of out [n_tokens, n_head, head_dim] back: token t by the angle of
  // position -(pos0 + t). rope() takes consecutive positions, so the tokens are reversed first
  // (token n - 1 - t at -(pos0 + n - 1) + t), rotated, and put back in order.
  void derope(Backend& backend, float* out, int64_t n_tokens, int64_t pos0,
              const RopeConfig& rope) {
    const Shape& s = shape_;
    const int64_t nh = s.n_head, hd = s.head_dim, n_rot = rope.n_rot;
    if (n_tokens == 1) {
      rope_tail(backend, out, 1, nh, hd, -pos0, rope, m_.rope.data());
      return;
    }
    float* tails = m_.rope.data();
    float* reversed = m_.reversed.data();
    m_.reverse_rows.resize(size_t(n_tokens));
    for (int64_t t = 0; t < n_tokens; ++t) m_.reverse_rows[size_t(t)] = int32_t(n_tokens - 1 - t);
    const int64_t row = nh * n_rot;
    backend.copy_strided_rows(out + (hd - n_rot), hd, tails, n_rot, n_tokens * nh, n_rot);
    backend.gather_rows(tails, m_.reverse_rows.data(), n_tokens, row, reversed);
    backend.rope(reversed, n_tokens, nh, n_rot, -(pos0 + n_tokens - 1), rope);
    backend.gather_rows(reversed, m_.reverse_rows.data(), n_tokens, row, tails);
    backend.copy_strided_rows(tails, n_rot, out + (hd - n_rot), hd, n_tokens * nh, n_rot);
  }

  // Cells first_cell .. first_cell + count - 1 (mod capacity) of a key-only layer into dst: one
  // copy, two where the range wraps.
  static void copy_cells(Backend& backend, const KvLayerView& kv, int64_t first_cell, int64_t count,
                         size_t cell_bytes, uint8_t* dst) {
    while (count > 0) {
      const int64_t cell = first_cell % kv.capacity;
      const int64_t run = std::min(count, kv.capacity - cell);
      backend.copy(dst, static_cast<const uint8_t*>(kv.k) + size_t(cell) * cell_bytes,
                   size_t(run) * cell_bytes);
      dst += size_t(run) * cell_bytes;
      first_cell += run;
      count -= run;
    }
  }

  // Row t of `run`: its window of raw keys and its compressed keys — those complete at its
  // position (every one for ratio 128; for ratio 4, the indexer's top_k once there are more),
  // ascending — gathered into a cache of their own that the row's query reads whole.
  void attend_row(Backend& backend, const Layer& l, int64_t il, const SequenceRun& run, int64_t t,
                  float scale) {
    const Shape& s = shape_;
    const int64_t hd = s.head_dim, pos = run.pos0 + t, row = run.row0 + t;
    const KvLayerView raw = run.kv->layer(il);
    const size_t cell_bytes = size_t(hd) * (raw.type == KvElement::kF16 ? 2 : 4);
    const int64_t first = std::max<int64_t>(0, pos - s.window + 1);
    const int64_t n_raw = pos - first + 1;
    const int64_t n_visible = l.ratio != 0 ? (pos + 1) / l.ratio : 0;
    const bool indexed = l.ratio == kOverlapRatio && n_visible > s.top_k;
    const int64_t n_chosen = indexed ? s.top_k : n_visible;
    const int64_t n_keys = n_raw + n_chosen;
    if (m_.gathered.size() < size_t(n_keys) * cell_bytes) {
      m_.gathered.resize(backend, size_t(n_keys + s.window) * cell_bytes);
    }
    uint8_t* gathered = m_.gathered.data();
    copy_cells(backend, raw, first, n_raw, cell_bytes, gathered);
    if (n_chosen > 0) {
      const KvLayerView keys = run.kv->layer(l.keys_kv);
      uint8_t* to = gathered + size_t(n_raw) * cell_bytes;
      if (indexed) {
        choose_blocks(backend, l, run, row, n_visible);
        backend.gather_key_cells(keys, m_.chosen.data(), n_chosen, to);
      } else {
        copy_cells(backend, keys, 0, n_chosen, cell_bytes, to);
      }
    }
    AttentionCall call;
    call.q = m_.q.data() + row * s.n_head * hd;
    call.out = m_.out.data() + row * s.n_head * hd;
    call.n_tokens = 1;
    call.n_head = s.n_head;
    call.pos0 = n_keys - 1;
    call.scale = scale;
    call.sinks = l.sinks.data();
    call.kv = {raw.type, gathered, gathered, n_keys, 1, hd, hd};
    backend.attention(call);
  }

  // The indexer's top_k of the n_visible compressed blocks for row `row`, ascending, into
  // m_.chosen: score_b = Σ_h ReLU(q_h · k_b) · w_h over its own compressed keys, the higher
  // first, the earlier block on a tie.
  void choose_blocks(Backend& backend, const Layer& l, const SequenceRun& run, int64_t row,
                     int64_t n_visible) {
    const int64_t ih = shape_.indexer_heads, id = shape_.indexer_dim;
    if (m_.scores.size() < size_t(n_visible)) {
      m_.scores.resize(backend,
                       size_t(std::max<int64_t>(n_visible, 2 * int64_t(m_.scores.size()))));
    }
    const KvLayerView keys = run.kv->layer(l.indexer_keys_kv);
    backend.indexer_scores(m_.iq.data() + row * ih * id, m_.iw.data() + row * ih, keys, 1, ih,
                           n_visible - 1, m_.scores.data());
    backend.top_k_positions(m_.scores.data(), 1, n_visible, n_visible - 1, shape_.top_k,
                            m_.chosen.data());
  }

  void ffn(Backend& backend, const Layer& l, int64_t il, const ForwardRequest& request, int64_t n,
           const Trace& trace) {
    const int64_t d = shape_.n_embd, k = moe_hp_.n_expert_used;
    m_.moe.router.given = nullptr;
    if (!l.hash.empty()) {
      for (int64_t t = 0; t < n; ++t) {
        const int32_t token = request.tokens[size_t(t)];
        std::copy_n(l.hash.data() + int64_t(token) * k, k, m_.hash.data() + t * k);
      }
      m_.moe.router.given = m_.hash.data();
    }
    moe_route(backend, l.moe, *request.experts, il, m_.xn.data(), n, m_.moe, trace,
              request.expert_backend);
    m_.moe.router.given = nullptr;
    prefetch_hashed(request, il + 1, n);
    moe_compute(backend, l.moe, *request.experts, il, m_.xn.data(), n, d, m_.moe, m_.branch.data(),
                trace, request.expert_backend);
    // The shared expert, clamped as the routed ones.
    const GluFfnWeights& sh = l.shared;
    backend.matmul(sh.gate, m_.xn.data(), m_.ffn.gate.data(), n);
    backend.matmul(sh.up, m_.xn.data(), m_.ffn.up.data(), n);
    const int64_t n_ff = sh.gate.n_rows;
    if (l.shared_limit > 0.0f) {
      backend.clamp_swiglu(m_.ffn.gate.data(), m_.ffn.up.data(), n * n_ff, l.shared_limit);
    }
    backend.glu(GluActivation::kSilu, m_.ffn.gate.data(), m_.ffn.up.data(), n, n_ff);
    backend.matmul(sh.down, m_.ffn.gate.data(), m_.shared.data(), n);
    trace("ffn_shexp", il, m_.shared.data(), d);
    backend.add(m_.branch.data(), m_.shared.data(), n * d);
    trace("ffn_out", il, m_.branch.data(), d);
  }

  // A hash-routed layer's experts are known from the tokens alone: ask for them while this
  // layer computes (decode steps only, as moe_prefetch's speculation).
  void prefetch_hashed(const ForwardRequest& request, int64_t next, int64_t n) {
    if (next >= hp_.n_layer || n > 1 || !request.experts->wants_prefetch()) return;
    const Layer& l = layers_[size_t(next)];
    if (l.hash.empty()) return;
    const int64_t k = moe_hp_.n_expert_used;
    const int32_t* ids = l.hash.data() + int64_t(request.tokens[0]) * k;
    std::vector<int32_t> experts(ids, ids + k);
    request.experts->prefetch(next, experts);
  }

  DecoderHParams hp_;
  MoeHParams moe_hp_;
  Shape shape_;
  HyperConnectionShape hc_;
  std::vector<int64_t> ratios_;
  int64_t n_hash_ = 0;
  ModelSummary summary_;
  RopeConfig rope_, compress_rope_;
  MatrixView token_embd_;
  OutputHead head_;
  HyperConnectionWeights head_hc_;
  std::vector<Layer> layers_;
  std::vector<KvLayerSpec> kv_layout_;
  experts::ExpertLayout expert_layout_;
  int64_t n_batch_ = 0;
  Scratch m_;
};

}  // namespace

std::unique_ptr<LanguageModel> make_deepseek4(const ModelFile& file) {
  return std::make_unique<DeepSeek4>(file);
}

}  // namespace sluice::model
