// Kimi delta attention (KDA): the recurrent layer of Kimi Linear, as llama.cpp builds it. Like
// the gated delta net (blocks/gated_delta_net, whose convolution and delta-rule ops it shares)
// but with separate attn_q / attn_k / attn_v projections, each through its own short causal
// depthwise convolution (ssm_conv1d_{q,k,v}) and SiLU, as many key as value heads, and a decay
// per key dimension rather than per head:
//   g = softplus(ssm_f_b(ssm_f_a(x)) + dt_bias) * ssm_a[head]      (dt_bias per channel)
//   S[:, i] *= exp(g[i]);  S += k (beta (v - S k))^T;  o = S q / sqrt(head_dim)
// with beta = sigmoid(ssm_beta x) and q, k L2-normalised per head. The output is RMS-normed per
// head (ssm_norm) and multiplied by sigmoid(ssm_g_b(ssm_g_a(x))) — a sigmoid, not SiLU — then
// projected by attn_output. Its states live in the sequence's KvCache (KvCache::recurrent). Every
// step is a backend op, so the layer runs on a GPU as on the CPU.
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

struct KdaShape {
  int64_t n_embd = 0;
  int64_t n_head = 0;
  int64_t head_dim = 0;     // kda.head_dim: key and value head size
  int64_t conv_kernel = 0;  // ssm.conv_kernel
  float norm_eps = 1e-6f;   // of the L2 norms of q, k and of ssm_norm

  int64_t inner() const { return n_head * head_dim; }
  int64_t conv_channels() const { return 3 * inner(); }  // q | k | v
  KvLayerSpec cache_spec() const {
    return KvLayerSpec{
        0, 0, 0, 0, (conv_kernel - 1) * conv_channels(), n_head * head_dim * head_dim};
  }
};

struct KdaWeights {
  MatrixView q, k, v;          // [n_embd, inner] attn_q / attn_k / attn_v
  std::vector<float> conv;     // [3 inner, conv_kernel]: the q, k and v kernels one after another
  MatrixView f_a, f_b;         // [n_embd, head_dim], [head_dim, inner]: the decay's low rank
  MatrixView beta;             // [n_embd, n_head]
  std::vector<float> a;        // [n_head] ssm_a (negative decay rates)
  std::vector<float> dt_bias;  // [inner]
  MatrixView g_a, g_b;         // [n_embd, head_dim], [head_dim, inner]: the output gate
  std::vector<float> norm;     // [head_dim] ssm_norm
  MatrixView out;              // [inner, n_embd] attn_output
};

KdaWeights bind_kimi_delta_attention(WeightBinder& binder, int64_t layer, const KdaShape& shape);

// Every buffer is the backend's memory (backend.h); the states live in the KvCache.
struct KdaScratch {
  BackendArray<float> proj;      // [3, n_batch, inner] the q, k and v projections
  BackendArray<float> qkv;       // [n_batch, 3 inner] them side by side, then convolved
  BackendArray<float> low;       // [n_batch, head_dim] the decay's low-rank f_a product
  BackendArray<float> low_gate;  // [n_batch, head_dim] the output gate's g_a product
  BackendArray<float> gate;      // [n_batch, inner] g (decay)
  BackendArray<float> out_gate;  // [n_batch, inner] the output gate's logits
  BackendArray<float> beta;      // [n_batch, n_head]
  BackendArray<float> core;      // [n_batch, inner] the delta rule's output
  std::vector<RecurrentLayerView> states;
  void reserve(Backend& backend, const KdaShape& shape, int64_t n_batch);
};

// out [n_tokens, n_embd] = KDA of x [n_tokens, n_embd]; each sequence's rows continue its
// cache's state for this layer.
void kimi_delta_attention(Backend& backend, const KdaWeights& w, const KdaShape& shape,
                          std::span<const SequenceRun> sequences, int64_t layer, const float* x,
                          int64_t n_tokens, KdaScratch& scratch, float* out, const Trace& trace);

}  // namespace sluice::model
