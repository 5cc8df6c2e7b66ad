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
#include "model/blocks/deepseek_moe_decoder.h"
#include "model/hparams.h"
#include "model/rope_scaling.h"

namespace sluice::model {
namespace {

constexpr const char* kArch = "laguna";

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

}  // namespace

// llama.cpp's laguna graph names the roped Q and K Qcur_rope / Kcur_rope (its Qcur is the bare
// projection); the attention block's Qcur / Kcur are roped, so they go to the observer under
// those names to line up with llama.cpp's eval callback.
std::unique_ptr<LanguageModel> make_laguna(const ModelFile& file) {
  const ArchMetadata meta(file, kArch);
  DeepSeekMoeDecoderConfig c;
  DecoderHParams& hp = c.hp;
  hp = read_decoder_hparams(meta, HeadCounts::kPerLayer);
  if (hp.head_dim_k != hp.head_dim_v) {
    fail(file.display_name(), ": ", kArch, " needs key_length == value_length");
  }
  const MoeHParams moe_hp = read_moe_hparams(meta, hp);
  c.summary = {kArch, hp.n_vocab, hp.n_embd, hp.n_layer, hp.n_ctx_train};
  c.trace_renames = {{"Qcur", "Qcur_rope"}, {"Kcur", "Kcur_rope"}};
  // The softplus output gate is Backend::mul_gate; everything else is the ordinary block and
  // DeepSeekMoE, as glm4moe: every step a backend op.
  c.runs_on_device = true;

  const int64_t window = meta.checked("attention.sliding_window",
                                      meta.get_int("attention.sliding_window", 0), 0, INT32_MAX);
  const std::vector<bool> sliding = laguna_sliding_layers(meta, hp.n_layer, window);
  // Sliding layers: plain RoPE, none of the full layers' scaling.
  const int64_t n_rot_swa =
      meta.checked("rope.dimension_count_swa", meta.get_int("rope.dimension_count_swa", hp.n_rot),
                   0, hp.head_dim_k);
  const float freq_base_swa = meta.get_float("rope.freq_base_swa", hp.rope_freq_base);
  const RopeScaling rope_scaling = read_rope_scaling(meta, hp.n_ctx_train, /*deepseek_yarn=*/false);
  const std::vector<int64_t> n_heads = meta.get_per_layer("attention.head_count", hp.n_layer);

  // The shared expert is one FFN of expert_shared_feed_forward_length (not n_ff_exp times a
  // count, as DeepSeek sizes it), so it is bound here rather than by bind_deepseek_moe.
  const int64_t n_ff_shexp =
      meta.checked("expert_shared_feed_forward_length",
                   meta.get_int("expert_shared_feed_forward_length"), 1, int64_t(1) << 20);
  MoeHParams routed_hp = moe_hp;
  routed_hp.n_expert_shared = 0;
  const RouterConfig router = deepseek_moe_router(moe_hp, ExpertGating::kSigmoid);

  WeightBinder binder(file);
  c.token_embd = binder.matrix("token_embd.weight", hp.n_embd, hp.n_vocab);
  c.head = bind_output_head(binder, c.token_embd, hp.n_embd, hp.n_vocab);
  c.expert_layout.files = binder.files();
  c.expert_layout.layers.resize(size_t(hp.n_layer));
  c.expert_layout.n_expert_used = moe_hp.n_expert_used;
  c.layers.resize(size_t(hp.n_layer));
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    DeepSeekMoeDecoderLayer& l = c.layers[size_t(il)];
    const int64_t n_head =
        meta.checked("attention.head_count", n_heads[size_t(il)], hp.n_head_kv, 4096);
    if (n_head % hp.n_head_kv != 0) meta.checked("attention.head_count_kv", -1, 1, n_head);
    l.shape = {hp.n_embd, n_head, hp.n_head_kv, hp.head_dim_k, hp.head_dim_v, hp.rms_eps};

    l.attn_norm = binder.vector(layer_tensor(il, "attn_norm.weight"), hp.n_embd);
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
      l.config.rope = {RopeStyle::kNeox, hp.n_rot, hp.rope_freq_base, 1.0f, nullptr};
      apply_rope_scaling(rope_scaling, l.config.rope);
    }
    l.config.window = slides ? window : 0;
    l.config.scale = 1.0f / std::sqrt(float(hp.head_dim_k));

    l.ffn_norm = binder.vector(layer_tensor(il, "ffn_norm.weight"), hp.n_embd);
    DeepSeekMoeWeights ffn =
        bind_deepseek_moe(binder, il, hp.n_embd, hp.n_ff, routed_hp, router, c.expert_layout);
    if (ffn.is_moe) {
      ffn.shared.gate =
          binder.matrix(layer_tensor(il, "ffn_gate_shexp.weight"), hp.n_embd, n_ff_shexp);
      ffn.shared.up = binder.matrix(layer_tensor(il, "ffn_up_shexp.weight"), hp.n_embd, n_ff_shexp);
      ffn.shared.down =
          binder.matrix(layer_tensor(il, "ffn_down_shexp.weight"), n_ff_shexp, hp.n_embd);
    }
    c.ffn.push_back(std::move(ffn));
  }
  binder.check_all_bound();
  return make_deepseek_moe_decoder(std::move(c));
}

}  // namespace sluice::model
