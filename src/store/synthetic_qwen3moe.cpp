// llama.cpp's LLM_ARCH_QWEN3MOE: attention with per-head q/k norms, routed experts (softmax,
// top-k) in every layer. Shapes first dimension fastest, as in GGUF.
#include "store/synthetic_plan.h"

namespace sluice {

void plan_qwen3moe(const SyntheticPlanRequest& request, TensorPlan& plan, ArchKeys& keys) {
  const SyntheticGeometry& g = request.geometry;
  const QType type = request.types.type, expert_type = request.types.expert_type;
  const uint64_t embd = g.n_embd, vocab = g.n_vocab, q = uint64_t{g.n_head} * g.head_dim,
                 kv = uint64_t{g.n_head_kv} * g.head_dim, ff = g.n_ff_exp, experts = g.n_expert;
  plan_embedding_and_head(plan, type, embd, vocab);
  for (uint32_t layer = 0; layer < request.layers; ++layer) {
    const std::string blk = block_prefix(layer);
    plan.norm(blk + "attn_norm.weight", embd);
    plan_gqa_projections(plan, blk, type, embd, q, kv);
    plan.norm(blk + "attn_q_norm.weight", g.head_dim);
    plan.norm(blk + "attn_k_norm.weight", g.head_dim);
    plan.norm(blk + "ffn_norm.weight", embd);
    // Router logits of spread ~3 make routing decisive, as trained routers are.
    plan.matrix(blk + "ffn_gate_inp.weight", QType::F32, {embd, experts}, 3.0f);
    plan.matrix(blk + "ffn_gate_exps.weight", expert_type, {embd, ff, experts});
    plan.matrix(blk + "ffn_up_exps.weight", expert_type, {embd, ff, experts});
    plan.matrix(blk + "ffn_down_exps.weight", expert_type, {ff, embd, experts});
  }

  keys.u32("block_count", request.layers);
  keys.u32("context_length", g.n_ctx);
  keys.u32("embedding_length", g.n_embd);
  keys.u32("feed_forward_length", g.n_ff);
  keys.u32("attention.head_count", g.n_head);
  keys.u32("attention.head_count_kv", g.n_head_kv);
  keys.u32("attention.key_length", g.head_dim);
  keys.u32("attention.value_length", g.head_dim);
  keys.f32("rope.freq_base", g.rope_freq_base);
  keys.f32("attention.layer_norm_rms_epsilon", g.rms_eps);
  keys.u32("expert_count", g.n_expert);
  keys.u32("expert_used_count", g.n_expert_used);
  keys.u32("expert_feed_forward_length", g.n_ff_exp);
}

}  // namespace sluice
