// llama.cpp's LLM_ARCH_DEEPSEEK4 (DeepSeek V4): hyper-connection mixing around attention and FFN
// (hc_*), single-latent attention with sinks and a grouped low-rank output, KV compressors on
// layers of compress ratio 4 (overlapping, with a lightning indexer) and 128, hash-routed leading
// layers (ffn_gate_tid2eid: a token → experts table) and score-routed ones (exp_probs_b), one
// shared expert. Names, shapes and keys as in llama.cpp's converter (see the deepseek4 files of
// ../shared/testdata/llamacpp-tiny).
#include <algorithm>

#include "store/synthetic_plan.h"

namespace sluice {
namespace {

// The compress ratio of `layer`: 0 for the first uncompressed_lead layers, then 4, 128, 4, …
int32_t compress_ratio(const SyntheticDeepSeek4& d, uint32_t layer) {
  if (layer < d.uncompressed_lead) return 0;
  return (layer - d.uncompressed_lead) % 2 == 0 ? 4 : 128;
}

// A KV compressor: kv and gate projections to `width` (twice the head for overlapping blocks of
// 4), a learned position embedding per slot of the block, and the norm of the compressed key.
void compressor(TensorPlan& plan, const std::string& prefix, QType type, uint64_t embd,
                uint64_t head, int32_t ratio) {
  const uint64_t width = (ratio == 4 ? 2 : 1) * head;
  plan.matrix(prefix + "_kv.weight", type, {embd, width});
  plan.matrix(prefix + "_gate.weight", type, {embd, width});
  plan.table(prefix + "_ape.weight", QType::F32, {width, uint64_t(ratio)}, 0.1f);
  plan.norm(prefix + "_norm.weight", head);
}

// Hyper-connection weights mixing `hc` streams: pre and post weights and a hc × hc combination.
void hyper_connection(TensorPlan& plan, const std::string& prefix, uint64_t embd, uint64_t hc) {
  const uint64_t mix = (2 + hc) * hc;
  plan.matrix(prefix + "_fn.weight", QType::F32, {embd * hc, mix});
  plan.table(prefix + "_base.weight", QType::F32, {mix}, 0.1f);
  plan.table(prefix + "_scale.weight", QType::F32, {3}, 0.1f);
}

}  // namespace

void plan_deepseek4(const SyntheticPlanRequest& request, TensorPlan& plan, ArchKeys& keys) {
  const SyntheticGeometry& g = request.geometry;
  const SyntheticDeepSeek4& d = g.ds4;
  const QType type = request.types.type, expert_type = request.types.expert_type;
  const uint64_t embd = g.n_embd, vocab = g.n_vocab, hd = g.head_dim, hc = d.hc, q_lora = d.q_lora,
                 experts = g.n_expert, ff = g.n_ff_exp, o_width = uint64_t{d.o_groups} * d.o_lora,
                 group_dim = uint64_t{g.n_head} / d.o_groups * hd;
  plan_embedding_and_head(plan, type, embd, vocab);
  plan.matrix("output_hc_fn.weight", QType::F32, {embd * hc, hc});
  plan.table("output_hc_base.weight", QType::F32, {hc}, 0.1f);
  plan.table("output_hc_scale.weight", QType::F32, {1}, 0.1f);
  std::vector<float> clamp;
  std::vector<int32_t> ratios;
  for (uint32_t layer = 0; layer < request.layers; ++layer) {
    const std::string blk = block_prefix(layer);
    const int32_t ratio = compress_ratio(d, layer);
    ratios.push_back(ratio);
    clamp.push_back(d.swiglu_limit);
    plan.norm(blk + "attn_norm.weight", embd);
    plan.table(blk + "attn_sinks.weight", QType::F32, {g.n_head}, 1.0f);
    plan.matrix(blk + "attn_q_a.weight", type, {embd, q_lora});
    plan.norm(blk + "attn_q_a_norm.weight", q_lora);
    plan.matrix(blk + "attn_q_b.weight", type, {q_lora, uint64_t{g.n_head} * hd});
    plan.matrix(blk + "attn_kv.weight", type, {embd, hd});
    plan.norm(blk + "attn_kv_a_norm.weight", hd);
    plan.matrix(blk + "attn_output_a.weight", type, {group_dim, o_width});
    plan.matrix(blk + "attn_output_b.weight", type, {o_width, embd});
    hyper_connection(plan, blk + "hc_attn", embd, hc);
    hyper_connection(plan, blk + "hc_ffn", embd, hc);
    if (ratio != 0) compressor(plan, blk + "attn_compressor", type, embd, hd, ratio);
    if (ratio == 4) {
      const uint64_t heads = g.indexer.heads, dim = g.indexer.dim;
      plan.matrix(blk + "indexer.proj.weight", type, {embd, heads});
      plan.matrix(blk + "indexer.attn_q_b.weight", type, {q_lora, heads * dim});
      compressor(plan, blk + "indexer_compressor", type, embd, dim, ratio);
    }
    plan.matrix(blk + "ffn_gate_inp.weight", QType::F32, {embd, experts}, 3.0f);
    if (layer < d.hash_layers) {
      // Hash routing: each token's experts are a row of this table, valid ids all.
      plan.expert_ids(blk + "ffn_gate_tid2eid.weight", {g.n_expert_used, vocab}, g.n_expert);
    } else {
      plan.table(blk + "exp_probs_b.bias", QType::F32, {experts}, 0.1f);
    }
    plan.norm(blk + "ffn_norm.weight", embd);
    plan.matrix(blk + "ffn_gate_exps.weight", expert_type, {embd, ff, experts});
    plan.matrix(blk + "ffn_up_exps.weight", expert_type, {embd, ff, experts});
    plan.matrix(blk + "ffn_down_exps.weight", expert_type, {ff, embd, experts});
    const uint64_t shared = ff * g.n_expert_shared;
    plan.matrix(blk + "ffn_gate_shexp.weight", type, {embd, shared});
    plan.matrix(blk + "ffn_up_shexp.weight", type, {embd, shared});
    plan.matrix(blk + "ffn_down_shexp.weight", type, {shared, embd});
  }

  keys.common(g, request.layers);
  keys.u32("attention.key_length", g.head_dim);
  keys.u32("attention.value_length", g.head_dim);
  keys.u32("rope.dimension_count", g.n_rot);
  keys.str("rope.scaling.type", "yarn");
  keys.f32("rope.scaling.factor", d.yarn_factor);
  keys.u32("rope.scaling.original_context_length", d.yarn_original_ctx);
  keys.u32("attention.q_lora_rank", d.q_lora);
  keys.u32("attention.sliding_window", d.window);
  keys.u32("expert_count", g.n_expert);
  keys.u32("expert_used_count", g.n_expert_used);
  keys.u32("expert_feed_forward_length", g.n_ff_exp);
  keys.u32("expert_shared_count", g.n_expert_shared);
  keys.f32("expert_weights_scale", g.expert_weights_scale);
  keys.boolean("expert_weights_norm", true);
  keys.u32("expert_gating_func", 4);  // sqrt(softplus)
  keys.array("swiglu_clamp_exp", clamp);
  keys.array("swiglu_clamp_shexp", clamp);
  keys.u32("attention.indexer.head_count", g.indexer.heads);
  keys.u32("attention.indexer.key_length", g.indexer.dim);
  keys.u32("attention.indexer.top_k", g.indexer.top_k);
  keys.u32("attention.output_group_count", d.o_groups);
  keys.u32("attention.output_lora_rank", d.o_lora);
  keys.array("attention.compress_ratios", ratios);
  keys.f32("attention.compress_rope_freq_base", d.compress_rope_base);
  keys.u32("hyper_connection.count", d.hc);
  keys.u32("hyper_connection.sinkhorn_iterations", d.hc_iterations);
  keys.f32("hyper_connection.epsilon", d.hc_eps);
  keys.u32("hash_layer_count", std::min(d.hash_layers, request.layers));
  keys.u32("embedding_length_out", g.n_embd * d.hc);
}

}  // namespace sluice
