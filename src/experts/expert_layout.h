// ExpertLayout: where every routed expert's matrices live on disk — per MoE layer, per part
// (gate, up, down, or a fused gate_up), the tensor type, the per-expert matrix shape and the
// byte offset of each expert in its file. The model fills it while binding weights; expert
// sources (resident views, the streaming cache) read it. Knows no architecture and no I/O.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/file.h"

namespace sluice::experts {

enum class ExpertPart : uint8_t { kGate, kUp, kDown, kGateUp };
inline constexpr size_t kExpertParts = 4;
const char* expert_part_name(ExpertPart part);  // "gate", "up", "down", "gate_up"

// One part of all experts of a layer: a 3-D tensor [n_cols, n_rows, n_expert] (GGUF order),
// expert e's matrix at offset + e * expert_stride in file `file_index` — or, for experts stored
// one tensor each in no regular order (a Hugging Face snapshot's), at expert_offsets[e] in file
// expert_files[e] (a layer may straddle two shards).
struct ExpertTensor {
  std::string name;  // e.g. "blk.3.ffn_up_exps.weight", for messages
  QType type = QType::F32;
  int64_t n_cols = 0;  // reduction length
  int64_t n_rows = 0;  // outputs
  uint32_t file_index = 0;
  uint64_t offset = 0;                   // absolute, of expert 0
  uint64_t expert_stride = 0;            // bytes between consecutive experts
  uint64_t expert_bytes = 0;             // bytes of one expert's matrix
  std::vector<uint64_t> expert_offsets;  // [n_expert] absolute; empty: offset + e * stride
  std::vector<uint32_t> expert_files;    // [n_expert]; empty: all in file_index

  bool present() const { return expert_bytes != 0; }
  uint64_t offset_of(int32_t expert) const {
    return expert_offsets.empty() ? offset + uint64_t(expert) * expert_stride
                                  : expert_offsets[size_t(expert)];
  }
  uint32_t file_of(int32_t expert) const {
    return expert_files.empty() ? file_index : expert_files[size_t(expert)];
  }
};

struct ExpertLayerLayout {
  int64_t n_expert = 0;  // 0: this layer has no routed experts
  std::array<ExpertTensor, kExpertParts> parts;
  const ExpertTensor& part(ExpertPart p) const { return parts[size_t(p)]; }
  uint64_t expert_bytes() const;  // of all present parts of one expert
};

struct ExpertLayout {
  std::vector<std::shared_ptr<File>> files;  // indexed by ExpertTensor::file_index
  std::vector<ExpertLayerLayout> layers;     // [n_layer]
  int64_t n_expert_used = 0;                 // experts one token selects per layer

  bool empty() const;                 // no layer has routed experts
  uint64_t total_bytes() const;       // every routed expert of every layer
  uint64_t max_expert_bytes() const;  // the largest single expert (all parts)
  int64_t n_moe_layers() const;
};

// The views of one expert's parts; data == nullptr for parts the layer does not have.
struct ExpertWeights {
  std::array<MatrixView, kExpertParts> parts;
  const MatrixView& part(ExpertPart p) const { return parts[size_t(p)]; }
};

}  // namespace sluice::experts
