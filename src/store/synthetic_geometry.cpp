// The geometry table. Full-size rows copy the family's Hugging Face config.json (hidden_size,
// num_hidden_layers, head_dim, moe_intermediate_size …); tiny rows are small enough for unit
// tests yet keep every row length a multiple of 256, so k-quant block layouts are exercised.
#include "store/synthetic_geometry.h"

#include <string>

#include "core/error.h"

namespace sluice {
namespace {

constexpr SyntheticGeometry kGeometries[] = {
    {
        .name = "tiny-moe",
        .architecture = "qwen3moe",
        .display_name = "Synthetic tiny MoE (qwen3moe)",
        .n_layer = 4,
        .n_ctx = 4096,
        .n_embd = 256,
        .n_ff = 512,
        .n_head = 4,
        .n_head_kv = 2,
        .head_dim = 64,
        .n_expert = 16,
        .n_expert_used = 4,
        .n_ff_exp = 256,
        .n_vocab = 512,
        .rope_freq_base = 1e6f,
        .rms_eps = 1e-6f,
        // Two block layouts in one small file: Q8_0 for attention and embeddings, Q4_K experts.
        .type = QType::Q8_0,
        .expert_type = QType::Q4_K,
    },
    {
        .name = "qwen3-30b-a3b",
        .architecture = "qwen3moe",
        .display_name = "Synthetic Qwen3-30B-A3B",
        .n_layer = 48,
        .n_ctx = 40960,
        .n_embd = 2048,
        .n_ff = 6144,
        .n_head = 32,
        .n_head_kv = 4,
        .head_dim = 128,
        .n_expert = 128,
        .n_expert_used = 8,
        .n_ff_exp = 768,
        .n_vocab = 151936,
        .rope_freq_base = 1e6f,
        .rms_eps = 1e-6f,
        .type = QType::Q4_K,
        .expert_type = QType::Q4_K,
    },
    {
        .name = "qwen3-235b-a22b",
        .architecture = "qwen3moe",
        .display_name = "Synthetic Qwen3-235B-A22B",
        .n_layer = 94,
        .n_ctx = 40960,
        .n_embd = 4096,
        .n_ff = 12288,
        .n_head = 64,
        .n_head_kv = 4,
        .head_dim = 128,
        .n_expert = 128,
        .n_expert_used = 8,
        .n_ff_exp = 1536,
        .n_vocab = 151936,
        .rope_freq_base = 1e6f,
        .rms_eps = 1e-6f,
        .type = QType::Q4_K,
        .expert_type = QType::Q4_K,
    },
};

}  // namespace

std::span<const SyntheticGeometry> synthetic_geometries() {
  return kGeometries;
}

const SyntheticGeometry& find_synthetic_geometry(std::string_view name) {
  std::string known;
  for (const auto& geometry : kGeometries) {
    if (geometry.name == name) return geometry;
    known += (known.empty() ? "" : ", ") + std::string(geometry.name);
  }
  fail("synth: unknown geometry '", name, "' (known: ", known, ")");
}

}  // namespace sluice
