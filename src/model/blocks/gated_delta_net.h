// Gated DeltaNet: the recurrent "linear attention" layer of qwen35, qwen35moe and qwen3next, as
// llama.cpp builds it. One projection gives the mixed q|k|v channels, another the output gate z,
// and small ones the per-head beta (write strength) and alpha (decay). The q|k|v channels pass a
// causal depthwise convolution over the last conv_kernel inputs (the conv state holds the
// previous conv_kernel - 1 across calls) and SiLU; q and k are L2-normalised per head; then each
// value head runs the gated delta rule over its own state matrix S (head_v_dim x head_k_dim):
//   S *= exp(g);  S += k (beta (v - S k))^T;  o = S q / sqrt(head_dim)
// with g = softplus(alpha + dt_bias) * ssm_a. The output is RMS-normed per head (ssm_norm),
// multiplied by SiLU(z) and projected by ssm_out. The states live in the sequence's KvCache
// (KvCache::recurrent): each run of tokens continues them, strictly in order. Every step is a
// backend op (convolution, norms, gates and the delta rule are Backend's recurrent-layer ops), so
// the layer runs on a GPU as on the CPU.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_array.h"
#include "model/blocks/trace.h"
#include "model/kv_cache.h"
#include "model/weights.h"

namespace sluice::model {

// Which key head a value head reads when there are more value heads than key heads.
enum class KeyHeadSharing : uint8_t {
  kTiled,    // value head h reads key head h % n_k_heads (qwen35, qwen35moe: ggml's broadcast)
  kGrouped,  // value head h reads key head h / (n_v_heads / n_k_heads) (qwen3next)
};

struct GatedDeltaNetShape {
  int64_t n_embd = 0;
  int64_t conv_kernel = 0;  // ssm.conv_kernel
  int64_t n_k_heads = 0;    // ssm.group_count
  int64_t n_v_heads = 0;    // ssm.time_step_rank
  int64_t head_dim = 0;     // ssm.state_size: both the key and the value head size
  float norm_eps = 1e-6f;   // of the L2 norms of q, k and of ssm_norm
  KeyHeadSharing sharing = KeyHeadSharing::kTiled;
  bool joint_beta_alpha = false;  // one ssm_ba projection (qwen3next) instead of ssm_beta/alpha

  int64_t key_dim() const { return n_k_heads * head_dim; }
  int64_t value_dim() const { return n_v_heads * head_dim; }
  int64_t conv_channels() const { return 2 * key_dim() + value_dim(); }
  // The KvCache layout of such a layer.
  KvLayerSpec cache_spec() const {
    return KvLayerSpec{
        0, 0, 0, 0, (conv_kernel - 1) * conv_channels(), n_v_heads * head_dim * head_dim};
  }
};

struct GatedDeltaNetWeights {
  MatrixView qkv;              // [n_embd, conv_channels] attn_qkv
  MatrixView z;                // [n_embd, value_dim] attn_gate
  MatrixView beta, alpha;      // [n_embd, n_v_heads] ssm_beta / ssm_alpha (when not joint)
  MatrixView beta_alpha;       // [n_embd, 2 n_v_heads] ssm_ba (joint): per key head [beta | alpha]
  std::vector<float> conv;     // [conv_channels, conv_kernel] ssm_conv1d
  std::vector<float> dt_bias;  // [n_v_heads] ssm_dt.bias
  std::vector<float> a;        // [n_v_heads] ssm_a (negative decay rates)
  std::vector<float> norm;     // [head_dim] ssm_norm
  MatrixView out;              // [value_dim, n_embd] ssm_out
};

// Binds blk.<layer>.{attn_qkv, attn_gate, ssm_conv1d, ssm_dt.bias, ssm_a, ssm_beta + ssm_alpha or
// ssm_ba, ssm_norm, ssm_out}.
GatedDeltaNetWeights bind_gated_delta_net(WeightBinder& binder, int64_t layer,
                                          const GatedDeltaNetShape& shape);

// Every buffer is the backend's memory (backend.h); the states live in the KvCache.
struct GatedDeltaNetScratch {
  BackendArray<float> qkv;   // [n_batch, conv_channels] projection, then conv + SiLU output
  BackendArray<float> z;     // [n_batch, value_dim]
  BackendArray<float> ba;    // [n_batch, 2 n_v_heads] the joint beta / alpha projection
  BackendArray<float> beta;  // [n_batch, n_v_heads]
  BackendArray<float> gate;  // [n_batch, n_v_heads] g
  BackendArray<float> core;  // [n_batch, value_dim] the delta rule's output
  std::vector<RecurrentLayerView> states;  // of each sequence run of the current forward
  void reserve(Backend& backend, const GatedDeltaNetShape& shape, int64_t n_batch);
};

// out [n_tokens, n_embd] = gated delta net of x [n_tokens, n_embd]: projections for all rows at
// once, then each sequence's rows convolved and run through the delta rule from its cache's
// state for this layer, which they advance.
void gated_delta_net(Backend& backend, const GatedDeltaNetWeights& w,
                     const GatedDeltaNetShape& shape, std::span<const SequenceRun> sequences,
                     int64_t layer, const float* x, int64_t n_tokens, GatedDeltaNetScratch& scratch,
                     float* out, const Trace& trace);

}  // namespace sluice::model
