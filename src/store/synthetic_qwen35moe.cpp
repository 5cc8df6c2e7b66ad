// llama.cpp's LLM_ARCH_QWEN35MOE (Qwen3.5 MoE): Gated DeltaNet layers (split attn_qkv /
// attn_gate / ssm_beta / ssm_alpha, a causal conv, a negative decay ssm_a) with every
// full_attention_interval-th layer gated full attention (q and its gate in one attn_q, q/k
// norms), each followed by routed experts plus a sigmoid-gated shared expert. Names, shapes and
// keys as in llama.cpp's converter (see the qwen35moe files of ../shared/testdata/llamacpp-tiny).
#include "store/synthetic_plan.h"

namespace sluice {

void plan_qwen35moe(const SyntheticPlanRequest& request, TensorPlan& plan, ArchKeys& keys) {
  const SyntheticGeometry& g = request.geometry;
  const SyntheticDeltaNet& dn = g.delta;
  const QType type = request.types.type, expert_type = request.types.expert_type;
  const uint64_t embd = g.n_embd, vocab = g.n_vocab, experts = g.n_expert, ff = g.n_ff_exp,
                 shared = g.n_ff_shexp, q = uint64_t{g.n_head} * g.head_dim,
                 kv = uint64_t{g.n_head_kv} * g.head_dim,
                 inner = uint64_t{dn.value_heads} * dn.value_dim,
                 conv_channels = 2 * uint64_t{dn.key_heads} * dn.key_dim + inner;
  plan_embedding_and_head(plan, type, embd, vocab);
  for (uint32_t layer = 0; layer < request.layers; ++layer) {
    const std::string blk = block_prefix(layer);
    plan.norm(blk + "attn_norm.weight", embd);
    plan.norm(blk + "post_attention_norm.weight", embd);
    if ((layer + 1) % dn.full_attention_interval == 0) {
      plan.matrix(blk + "attn_q.weight", type, {embd, 2 * q});  // queries and their gate
      plan.matrix(blk + "attn_k.weight", type, {embd, kv});
      plan.matrix(blk + "attn_v.weight", type, {embd, kv});
      plan.matrix(blk + "attn_output.weight", type, {q, embd});
      plan.norm(blk + "attn_q_norm.weight", g.head_dim);
      plan.norm(blk + "attn_k_norm.weight", g.head_dim);
    } else {
      plan.matrix(blk + "attn_qkv.weight", type, {embd, conv_channels});
      plan.matrix(blk + "attn_gate.weight", type, {embd, inner});
      plan.matrix(blk + "ssm_conv1d.weight", QType::F32, {dn.conv_kernel, conv_channels});
      plan.table(blk + "ssm_dt.bias", QType::F32, {dn.value_heads}, 0.5f);
      // A = -exp(A_log): a decay, so the recurrent state shrinks instead of blowing up.
      plan.negative(blk + "ssm_a", {dn.value_heads}, 0.6f, 1.6f);
      plan.matrix(blk + "ssm_beta.weight", type, {embd, dn.value_heads});
      plan.matrix(blk + "ssm_alpha.weight", type, {embd, dn.value_heads});
      plan.norm(blk + "ssm_norm.weight", dn.value_dim);
      plan.matrix(blk + "ssm_out.weight", type, {inner, embd});
    }
    plan.matrix(blk + "ffn_gate_inp.weight", QType::F32, {embd, experts}, 3.0f);
    plan.matrix(blk + "ffn_gate_exps.weight", expert_type, {embd, ff, experts});
    plan.matrix(blk + "ffn_up_exps.weight", expert_type, {embd, ff, experts});
    plan.matrix(blk + "ffn_down_exps.weight", expert_type, {ff, embd, experts});
    plan.matrix(blk + "ffn_gate_shexp.weight", type, {embd, shared});
    plan.matrix(blk + "ffn_up_shexp.weight", type, {embd, shared});
    plan.matrix(blk + "ffn_down_shexp.weight", type, {shared, embd});
    plan.matrix(blk + "ffn_gate_inp_shexp.weight", QType::F32, {embd});
  }

  keys.common(g, request.layers);
  keys.u32("attention.key_length", g.head_dim);
  keys.u32("attention.value_length", g.head_dim);
  keys.u32("rope.dimension_count", g.n_rot);
  keys.u32("ssm.conv_kernel", dn.conv_kernel);
  keys.u32("ssm.state_size", dn.key_dim);
  keys.u32("ssm.group_count", dn.key_heads);
  keys.u32("ssm.time_step_rank", dn.value_heads);
  keys.u32("ssm.inner_size", uint32_t(inner));
  keys.u32("full_attention_interval", dn.full_attention_interval);
  keys.array("rope.dimension_sections",
             std::vector<int32_t>(std::begin(dn.rope_sections), std::end(dn.rope_sections)));
  keys.u32("expert_count", g.n_expert);
  keys.u32("expert_used_count", g.n_expert_used);
  keys.u32("expert_feed_forward_length", g.n_ff_exp);
  keys.u32("expert_shared_feed_forward_length", g.n_ff_shexp);
}

}  // namespace sluice
