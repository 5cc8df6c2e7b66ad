// llama.cpp's LLM_ARCH_GLM_DSA (GLM-5.x): MLA with split attn_k_b / attn_v_b, a DSA lightning
// indexer on "full" layers (the others reuse its choice), leading dense FFN layers, then routed
// experts with sigmoid scores and exp_probs_b plus shared experts. Names, shapes and keys as in
// llama.cpp's converter (see the glmdsa files of ../shared/testdata/llamacpp-tiny).
#include "store/synthetic_plan.h"

namespace sluice {
namespace {

bool full_indexer(const SyntheticIndexer& indexer, uint32_t layer) {
  if (layer < indexer.full_lead) return true;
  return (layer - (indexer.full_lead - 1)) % indexer.full_every == 0;
}

}  // namespace

void plan_glm_dsa(const SyntheticPlanRequest& request, TensorPlan& plan, ArchKeys& keys) {
  const SyntheticGeometry& g = request.geometry;
  const SyntheticMla& m = g.mla;
  const QType type = request.types.type, expert_type = request.types.expert_type;
  const uint64_t embd = g.n_embd, vocab = g.n_vocab, heads = g.n_head, experts = g.n_expert,
                 ff = g.n_ff_exp, shared = uint64_t{g.n_ff_exp} * g.n_expert_shared;
  plan_embedding_and_head(plan, type, embd, vocab);
  std::vector<bool> indexer_types;
  for (uint32_t layer = 0; layer < request.layers; ++layer) {
    const std::string blk = block_prefix(layer);
    const bool full = full_indexer(g.indexer, layer);
    indexer_types.push_back(full);
    plan.norm(blk + "attn_norm.weight", embd);
    plan.matrix(blk + "attn_q_a.weight", type, {embd, m.q_lora});
    plan.norm(blk + "attn_q_a_norm.weight", m.q_lora);
    plan.matrix(blk + "attn_q_b.weight", type, {m.q_lora, heads * (m.k_nope + m.k_rope)});
    plan.matrix(blk + "attn_kv_a_mqa.weight", type, {embd, uint64_t{m.kv_lora} + m.k_rope});
    plan.norm(blk + "attn_kv_a_norm.weight", m.kv_lora);
    plan.matrix_or_fallback(blk + "attn_k_b.weight", type, {m.k_nope, m.kv_lora, heads});
    plan.matrix_or_fallback(blk + "attn_v_b.weight", type, {m.kv_lora, m.v, heads});
    plan.matrix(blk + "attn_output.weight", type, {heads * m.v, embd});
    if (full) {
      const uint64_t ih = g.indexer.heads, id = g.indexer.dim;
      plan.matrix(blk + "indexer.attn_q_b.weight", type, {m.q_lora, ih * id});
      plan.matrix(blk + "indexer.attn_k.weight", type, {embd, id});
      plan.norm(blk + "indexer.k_norm.weight", id);
      plan.table(blk + "indexer.k_norm.bias", QType::F32, {id}, 0.1f);
      plan.matrix(blk + "indexer.proj.weight", type, {embd, ih});
    }
    plan.norm(blk + "ffn_norm.weight", embd);
    if (layer < g.n_dense_lead) {
      plan.matrix(blk + "ffn_gate.weight", type, {embd, g.n_ff});
      plan.matrix(blk + "ffn_up.weight", type, {embd, g.n_ff});
      plan.matrix(blk + "ffn_down.weight", type, {g.n_ff, embd});
      continue;
    }
    plan.matrix(blk + "ffn_gate_inp.weight", QType::F32, {embd, experts}, 3.0f);
    plan.matrix(blk + "ffn_gate_exps.weight", expert_type, {embd, ff, experts});
    plan.matrix(blk + "ffn_up_exps.weight", expert_type, {embd, ff, experts});
    plan.matrix(blk + "ffn_down_exps.weight", expert_type, {ff, embd, experts});
    plan.table(blk + "exp_probs_b.bias", QType::F32, {experts}, 0.1f);
    plan.matrix(blk + "ffn_gate_shexp.weight", type, {embd, shared});
    plan.matrix(blk + "ffn_up_shexp.weight", type, {embd, shared});
    plan.matrix(blk + "ffn_down_shexp.weight", type, {shared, embd});
  }

  keys.common(g, request.layers);
  keys.u32("feed_forward_length", g.n_ff);
  keys.u32("rope.dimension_count", m.k_rope);
  keys.u32("attention.kv_lora_rank", m.kv_lora);
  keys.u32("attention.key_length", m.kv_lora + m.k_rope);
  keys.u32("attention.value_length", m.kv_lora);
  keys.u32("attention.key_length_mla", m.k_nope + m.k_rope);
  keys.u32("attention.value_length_mla", m.v);
  keys.u32("attention.q_lora_rank", m.q_lora);
  keys.u32("leading_dense_block_count", g.n_dense_lead);
  keys.u32("expert_count", g.n_expert);
  keys.u32("expert_used_count", g.n_expert_used);
  keys.u32("expert_feed_forward_length", g.n_ff_exp);
  keys.u32("expert_shared_count", g.n_expert_shared);
  keys.f32("expert_weights_scale", g.expert_weights_scale);
  keys.boolean("expert_weights_norm", true);
  keys.u32("expert_gating_func", 2);  // sigmoid
  keys.u32("attention.indexer.head_count", g.indexer.heads);
  keys.u32("attention.indexer.key_length", g.indexer.dim);
  keys.u32("attention.indexer.top_k", g.indexer.top_k);
  keys.array("attention.indexer.types", indexer_types);
}

}  // namespace sluice
