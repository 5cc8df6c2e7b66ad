// llama.cpp's LLM_ARCH_LLAMA, the dense decoder (Llama 3, SmolLM2): attention without Q/K norms,
// a SwiGLU FFN in every layer, a separate output matrix. Tensors and keys are those of
// llama.cpp's converter for a Llama checkpoint (as in ../shared/testdata/llamacpp-tiny's
// llama-dense.gguf). Llama 3.1's rope_freqs.weight (frequency factors computed from
// rope_scaling) is not written: the generator makes random contents only, so the file rotates
// as plain Llama 3 does; the weights read per token change by 256 bytes, nothing else.
#include "store/synthetic_plan.h"

namespace sluice {

void plan_llama(const SyntheticPlanRequest& request, TensorPlan& plan, ArchKeys& keys) {
  const SyntheticGeometry& g = request.geometry;
  const QType type = request.types.type;
  const uint64_t embd = g.n_embd, vocab = g.n_vocab, q = uint64_t{g.n_head} * g.head_dim,
                 kv = uint64_t{g.n_head_kv} * g.head_dim, ff = g.n_ff;
  plan_embedding_and_head(plan, type, embd, vocab);
  for (uint32_t layer = 0; layer < request.layers; ++layer) {
    const std::string blk = block_prefix(layer);
    plan.norm(blk + "attn_norm.weight", embd);
    plan_gqa_projections(plan, blk, type, embd, q, kv);
    plan.norm(blk + "ffn_norm.weight", embd);
    plan.matrix(blk + "ffn_gate.weight", type, {embd, ff});
    plan.matrix(blk + "ffn_up.weight", type, {embd, ff});
    plan.matrix(blk + "ffn_down.weight", type, {ff, embd});
  }

  keys.common(g, request.layers);
  keys.u32("feed_forward_length", g.n_ff);
  keys.u32("attention.key_length", g.head_dim);
  keys.u32("attention.value_length", g.head_dim);
  keys.u32("rope.dimension_count", g.n_rot != 0 ? g.n_rot : g.head_dim);
}

}  // namespace sluice
