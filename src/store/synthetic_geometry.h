// The geometries the synthetic-model generator knows: one row per model family and size, with
// the hyper-parameters the file's metadata states and the tensor types it uses by default. Only
// numbers; what tensors they imply is synthetic_model.cpp's job.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "quant/qtype.h"

namespace sluice {

struct SyntheticGeometry {
  std::string_view name;          // "qwen3-30b-a3b"
  std::string_view architecture;  // general.architecture
  std::string_view display_name;  // general.name
  uint32_t n_layer = 0;
  uint32_t n_ctx = 0;
  uint32_t n_embd = 0;
  uint32_t n_ff = 0;  // feed_forward_length: the dense FFN a family member would have
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
};

std::span<const SyntheticGeometry> synthetic_geometries();

// The geometry called `name`; a sluice::Error naming it and the known names otherwise.
const SyntheticGeometry& find_synthetic_geometry(std::string_view name);

}  // namespace sluice
