// The geometries the synthetic-model generator knows: one row per model family and size, with
// the hyper-parameters the file's metadata states and the tensor types it uses by default. Only
// numbers; what tensors they imply is the job of the architecture's planner
// (synthetic_<architecture>.cpp). Fields an architecture does not use stay zero.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "quant/qtype.h"

namespace sluice {

// Multi-head latent attention (glm-dsa): queries through a q_lora latent, keys and values
// through one kv_lora latent plus a shared rope part.
struct SyntheticMla {
  uint32_t q_lora = 0;
  uint32_t kv_lora = 0;
  uint32_t k_nope = 0;  // qk_nope_head_dim
  uint32_t k_rope = 0;  // qk_rope_head_dim
  uint32_t v = 0;       // v_head_dim
};

// A lightning indexer (glm-dsa, deepseek4). glm-dsa layers run their own ("full") or reuse the
// last full layer's choice ("shared"): full when layer < full_lead or
// (layer - (full_lead - 1)) % full_every == 0, as GLM-5.2's index_topk_freq / offset give.
struct SyntheticIndexer {
  uint32_t heads = 0;
  uint32_t dim = 0;
  uint32_t top_k = 0;
  uint32_t full_lead = 0;
  uint32_t full_every = 1;
};

// DeepSeek V4: hyper-connection streams, grouped low-rank output, a sliding window of raw keys,
// compressed keys per layer (compress ratio 0 for the first `uncompressed_lead` layers, then 4
// and 128 alternating), hash-routed leading layers, YaRN on compressed layers.
struct SyntheticDeepSeek4 {
  uint32_t hc = 0;             // hc_mult
  uint32_t hc_iterations = 0;  // hc_sinkhorn_iters
  float hc_eps = 0;
  uint32_t o_groups = 0;
  uint32_t o_lora = 0;
  uint32_t q_lora = 0;
  uint32_t window = 0;  // sliding_window
  uint32_t uncompressed_lead = 0;
  uint32_t hash_layers = 0;
  float compress_rope_base = 0;
  float yarn_factor = 0;
  uint32_t yarn_original_ctx = 0;
  float swiglu_limit = 0;
};

// Gated DeltaNet layers interleaved with gated full attention (qwen35moe): every
// full_attention_interval-th layer is attention, the others recurrent.
struct SyntheticDeltaNet {
  uint32_t conv_kernel = 0;
  uint32_t key_heads = 0;    // linear_num_key_heads (ssm.group_count)
  uint32_t value_heads = 0;  // linear_num_value_heads (ssm.time_step_rank)
  uint32_t key_dim = 0;      // linear_key_head_dim (ssm.state_size)
  uint32_t value_dim = 0;    // linear_value_head_dim
  uint32_t full_attention_interval = 0;
  int32_t rope_sections[4] = {};  // M-RoPE sections over the rotated pairs
};

struct SyntheticGeometry {
  std::string_view name;          // "qwen3-30b-a3b"
  std::string_view architecture;  // general.architecture
  std::string_view display_name;  // general.name
  uint32_t n_layer = 0;
  uint32_t n_ctx = 0;
  uint32_t n_embd = 0;
  uint32_t n_ff = 0;  // feed_forward_length: the dense FFN (of leading dense layers, if any)
  uint32_t n_head = 0;
  uint32_t n_head_kv = 0;
  uint32_t head_dim = 0;
  uint32_t n_expert = 0;
  uint32_t n_expert_used = 0;
  uint32_t n_ff_exp = 0;
  uint32_t n_vocab = 0;
  float rope_freq_base = 0;
  float rms_eps = 0;
  QType type = QType::Q4_K;         // matrices outside the experts
  QType expert_type = QType::Q4_K;  // routed experts
  // Used by some architectures only.
  uint32_t n_rot = 0;            // rotated dimensions per head (0: all)
  uint32_t n_expert_shared = 0;  // shared experts, each n_ff_exp wide (n_ff_shexp if set)
  uint32_t n_ff_shexp = 0;
  uint32_t n_dense_lead = 0;  // leading layers with a dense FFN instead of experts
  float expert_weights_scale = 0;
  SyntheticMla mla = {};
  SyntheticIndexer indexer = {};
  SyntheticDeepSeek4 ds4 = {};
  SyntheticDeltaNet delta = {};
};

std::span<const SyntheticGeometry> synthetic_geometries();

// The geometry called `name`; a sluice::Error naming it and the known names otherwise.
const SyntheticGeometry& find_synthetic_geometry(std::string_view name);

}  // namespace sluice
