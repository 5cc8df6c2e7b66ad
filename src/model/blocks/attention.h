// Self-attention block of decoder transformers: Q/K/V projections (optional biases), optional
// per-head RMS norm of Q and K, RoPE, the KV-cache write, grouped-query attention over the cache
// (optionally sliding, optionally with per-head sinks), an optional output gate (sigmoid or
// softplus, per output element or per head), and the output projection.
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

// What the gate's logits g become before they scale the attention output.
enum class OutputGate : uint8_t { kSigmoid, kSoftplus };

struct AttentionWeights {
  MatrixView wq, wk, wv,
      wo;  // [n_embd, n_head*dk], [n_embd, n_kv*dk], [n_embd, n_kv*dv], [n_head*dv, n_embd]
           // wv.data == nullptr: the values are the key projection (gemma4, dk == dv)
  std::vector<float> bq, bk, bv, bo;  // empty when the model has none
  std::vector<float> q_norm, k_norm;  // [dk] (or all heads) RMS norm weights; empty when none
  // [n_embd, n_head*dv] one logit per output element, or [n_embd, n_head] one per head (Laguna),
  // broadcast over the head's dv values; data == nullptr when none.
  MatrixView gate;
  OutputGate gate_act = OutputGate::kSigmoid;
  std::vector<float> sinks;  // [n_head] attention-sink logits (gpt-oss); empty when none
};

struct AttentionShape {
  int64_t n_embd = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
  float norm_eps = 1e-6f;  // of q_norm / k_norm
  // q_norm / k_norm span all heads ([n_head*dk], [n_kv*dk]: OLMoE) instead of one head ([dk]).
  bool qk_norm_across_heads = false;
  bool v_norm = false;  // each value head RMS-normed without weights (gemma4)
  // attn_q yields per head [query (dk) | gate (dk)] (qwen3next, qwen35): the query is split off
  // and the gate's sigmoid scales the head's output, as with `gate` (needs dk == dv).
  bool gated_query = false;
};

struct AttentionLayerConfig {
  RopeConfig rope;  // style kNone: no rotation on this layer
  int64_t window = 0;
  float scale = 1.0f;  // applied to scores (q·k)
  // Gemma multiplies the query by the scale before attention rather than the scores after;
  // the two round differently, and llama.cpp does what the model's reference does.
  bool scale_query = false;
  // >= 0: the layer has no K/V of its own and attends over that earlier layer's cache (gemma4's
  // last layers share the cache of the last one of their kind); -1: its own, written here.
  int64_t shared_kv_layer = -1;
};

// Binds blk.<layer>.attn_{q,k,v,output}.weight and whatever of the optional tensors exist:
// attn_{q,k,v,output}.bias, attn_{q,k}_norm.weight, and attn_gate.weight when `with_gate`.
AttentionWeights bind_attention(WeightBinder& binder, int64_t layer, const AttentionShape& shape,
                                bool with_gate);

// Scratch of one chunk: q [n, n_head*dk], k [n, n_kv*dk], v [n, n_kv*dv], attn [n, n_head*dv],
// gate [n, n_head*dv].
struct AttentionScratch {
  BackendArray<float> q, k, v, attn, gate;
  BackendArray<float> q_full;  // [n, n_head*2*dk] the gated query's projection
  void reserve(Backend& backend, const AttentionShape& shape, int64_t n_batch);
};

// out [n_tokens, n_embd] = attention(x [n_tokens, n_embd]): projections for all rows at once,
// then each sequence's rows roped at its positions, appended to its cache's layer `layer` and
// attending over that cache alone.
void self_attention(Backend& backend, const AttentionWeights& w, const AttentionShape& shape,
                    const AttentionLayerConfig& config, std::span<const SequenceRun> sequences,
                    int64_t layer, const float* x, int64_t n_tokens, AttentionScratch& scratch,
                    float* out, const Trace& trace);

}  // namespace sluice::model
