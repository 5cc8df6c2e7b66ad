// OpSignature: what one CudaBackend op bakes into the kernels a recorded step holds — the op,
// its pointers, sizes, enums, float parameters (bit for bit) and the host lists that travel in
// kernel parameters — as a list of 64-bit words. A held recording is replayed only when every
// op of the next step has the signature of the op recorded at the same index
// (cuda_step_graph.h). Per-step values the graph reads from memory (positions through the
// parameter table, uploaded bytes through the staging area) are left out. Structs are added
// field by field, never as raw bytes (their padding is undefined). Plain C++ header (C++17: the
// .cu files include it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backend/backend.h"

namespace sluice::cuda {

enum class OpKind : uint8_t {
  kMatmul,
  kMatmulSharedInput,
  kGetRows,
  kRmsNorm,
  kRope,
  kKvStore,
  kAttention,
  kGlu,
  kMulSigmoid,
  kAdd,
  kAddBias,
  kScale,
  kSoftcap,
  kSoftmaxRows,
  kGatherRows,
  kScatterRows,
  kWeightedSum,
  kSelectExperts,
  kMatmulExperts,
  kMatmulExpertGroups,
  kUpload,
  kDownload,
  kCopy,
  kAddRmsNorm,
  kCopyStridedRows,
  kCausalConvSilu,
  kL2NormHeads,
  kDeltaGates,
  kDeltaRule,
  kMulGate,
  kMulRows,
  kLayerNorm,
  kIndexerScores,
  kTopKPositions,
  kAttentionSelected,
  kAddExpertBias,
  kHyperMix,
  kHyperFold,
  kHyperExpand,
  kClampSwiglu,
  kKvCompress,
  kGatherKeyCells,
  kPostNormAddRmsNorm,
  kAttentionInputs,
  kGluMatmul,
  kScaleExpertRows,
};

class OpSignature {
 public:
  // Enough for every op with an inline host list (128 int32 entries, two per word) and a
  // matmul_shared_input of a few dozen weights; longer ones set overflowed() and are never
  // recorded (the step then runs unrecorded).
  static constexpr size_t kCapacity = 192;

  explicit OpSignature(OpKind kind) { word(uint64_t(kind)); }

  OpSignature& add(int64_t v) { return word(uint64_t(v)); }
  OpSignature& add(uint64_t v) { return word(v); }
  OpSignature& add(bool v) { return word(v ? 1 : 0); }
  OpSignature& add(const void* p) { return word(uint64_t(reinterpret_cast<uintptr_t>(p))); }
  OpSignature& add(float v) {
    uint32_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    return word(bits);
  }
  // The entries of a host list, two per word.
  OpSignature& add_list(const int32_t* list, int64_t n) {
    add(n);
    for (int64_t i = 0; i < n; i += 2) {
      const uint64_t lo = uint32_t(list[i]);
      const uint64_t hi = i + 1 < n ? uint32_t(list[i + 1]) : 0;
      word(lo | hi << 32);
    }
    return *this;
  }
  OpSignature& add(const MatrixView& w) {
    return add(uint64_t(w.type)).add(w.data).add(w.n_cols).add(w.n_rows);
  }
  OpSignature& add(const ExpertStack& s) {
    return add(uint64_t(s.type)).add(s.data).add(s.stride).add(s.count).add(s.n_cols).add(s.n_rows);
  }
  OpSignature& add(const RopeConfig& c) {
    add(uint64_t(c.style)).add(c.n_rot).add(c.freq_base).add(c.freq_scale).add(c.freq_factors);
    return add(c.ext_factor).add(c.attn_factor).add(c.beta_fast).add(c.beta_slow).add(c.n_ctx_orig);
  }
  OpSignature& add(const KvLayerView& kv) {
    add(uint64_t(kv.type)).add(kv.k).add(kv.v).add(kv.capacity).add(kv.n_head_kv);
    return add(kv.head_dim_k).add(kv.head_dim_v);
  }
  OpSignature& add(const ExpertSelection& s) {
    add(s.n_expert).add(s.n_expert_used).add(s.n_group).add(s.n_group_used);
    return add(s.norm_weights).add(s.weights_scale).add(uint64_t(s.scoring));
  }

  const uint64_t* words() const { return words_; }
  size_t size() const { return size_; }
  bool overflowed() const { return overflowed_; }

 private:
  OpSignature& word(uint64_t w) {
    if (size_ < kCapacity) {
      words_[size_++] = w;
    } else {
      overflowed_ = true;
    }
    return *this;
  }

  uint64_t words_[kCapacity];
  size_t size_ = 0;
  bool overflowed_ = false;
};

}  // namespace sluice::cuda
