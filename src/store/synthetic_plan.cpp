// The planner's common parts: tensor entries with their value spreads and byte sizes, the keys
// every architecture writes, and the table of architectures.
#include "store/synthetic_plan.h"

#include <cmath>

#include "core/error.h"

namespace sluice {

void TensorPlan::matrix(std::string name, QType type, std::vector<uint64_t> shape, float gain) {
  const float rms = gain / std::sqrt(float(shape[0]));
  add(std::move(name), type, std::move(shape), {WeightSpread::Kind::matrix, rms});
}

void TensorPlan::matrix_or_fallback(std::string name, QType type, std::vector<uint64_t> shape) {
  for (QType candidate : {type, QType::Q8_0, QType::F16}) {
    if (shape[0] % traits_of(candidate).block_size == 0) {
      matrix(std::move(name), candidate, std::move(shape));
      return;
    }
  }
  matrix(std::move(name), QType::F32, std::move(shape));
}

void TensorPlan::norm(std::string name, uint64_t n) {
  add(std::move(name), QType::F32, {n}, {WeightSpread::Kind::norm, 0.1f});
}

void TensorPlan::table(std::string name, QType type, std::vector<uint64_t> shape, float rms) {
  add(std::move(name), type, std::move(shape), {WeightSpread::Kind::matrix, rms});
}

void TensorPlan::negative(std::string name, std::vector<uint64_t> shape, float lo, float hi) {
  WeightSpread spread{WeightSpread::Kind::negative, lo};
  spread.high = hi;
  add(std::move(name), QType::F32, std::move(shape), spread);
}

void TensorPlan::expert_ids(std::string name, std::vector<uint64_t> shape, uint32_t n_expert) {
  WeightSpread spread{WeightSpread::Kind::expert_ids, 0};
  spread.n_expert = n_expert;
  spread.row = uint32_t(shape[0]);
  add(std::move(name), QType::I32, std::move(shape), spread);
}

void TensorPlan::add(std::string name, QType type, std::vector<uint64_t> shape,
                     WeightSpread spread) {
  const auto& traits = traits_of(type);
  if (shape[0] % traits.block_size != 0) {
    fail("synth: ", name, " has rows of ", shape[0], " values, not a multiple of the ",
         traits.block_size, "-value blocks of ", traits.name, "; choose another type");
  }
  uint64_t n_elements = 1;
  for (uint64_t dim : shape) n_elements *= dim;
  const uint64_t n_bytes = n_elements / traits.block_size * traits.block_bytes;
  tensors_.push_back({std::move(name), type, std::move(shape), spread, n_elements, n_bytes});
}

void ArchKeys::common(const SyntheticGeometry& g, uint32_t layers) {
  u32("block_count", layers);
  u32("context_length", g.n_ctx);
  u32("embedding_length", g.n_embd);
  u32("attention.head_count", g.n_head);
  u32("attention.head_count_kv", g.n_head_kv);
  f32("attention.layer_norm_rms_epsilon", g.rms_eps);
  f32("rope.freq_base", g.rope_freq_base);
  u32("vocab_size", g.n_vocab);
}

std::string block_prefix(uint32_t layer) {
  return "blk." + std::to_string(layer) + ".";
}

void plan_embedding_and_head(TensorPlan& plan, QType type, uint64_t n_embd, uint64_t n_vocab) {
  plan.table("token_embd.weight", type, {n_embd, n_vocab}, 1.0f);
  plan.norm("output_norm.weight", n_embd);
  plan.matrix("output.weight", type, {n_embd, n_vocab});
}

void plan_gqa_projections(TensorPlan& plan, const std::string& blk, QType type, uint64_t n_embd,
                          uint64_t q, uint64_t kv) {
  plan.matrix(blk + "attn_q.weight", type, {n_embd, q});
  plan.matrix(blk + "attn_k.weight", type, {n_embd, kv});
  plan.matrix(blk + "attn_v.weight", type, {n_embd, kv});
  plan.matrix(blk + "attn_output.weight", type, {q, n_embd});
}

SyntheticPlanner synthetic_planner(std::string_view architecture) {
  struct Entry {
    std::string_view architecture;
    SyntheticPlanner planner;
  };
  static constexpr Entry kPlanners[] = {
      {"qwen3moe", plan_qwen3moe},   {"deepseek4", plan_deepseek4}, {"glm-dsa", plan_glm_dsa},
      {"qwen35moe", plan_qwen35moe}, {"llama", plan_llama},
  };
  for (const auto& entry : kPlanners) {
    if (entry.architecture == architecture) return entry.planner;
  }
  fail("synth: no planner for architecture '", architecture, "'");
}

}  // namespace sluice
