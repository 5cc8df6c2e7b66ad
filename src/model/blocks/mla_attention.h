// Multi-head latent attention (DeepSeek V2/V3) in the absorbed form llama.cpp runs: each token
// stores one compressed latent (kv_lora_rank, RMS-normed) plus one shared roped key part
// (n_rot) — the KV cache holds a single "KV head" of kv_lora_rank + n_rot, whatever n_head is.
// Each head's non-rotary query is multiplied into latent space by attn_k_b, so attention runs
// over the latent directly (multi-query attention: all heads share that one cached head, the
// latent also serving as the value), and each head's latent output leaves through attn_v_b.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_array.h"
#include "model/blocks/selected_attention.h"
#include "model/blocks/trace.h"
#include "model/kv_cache.h"
#include "model/weights.h"

namespace sluice::model {

struct MlaShape {
  int64_t n_embd = 0;
  int64_t n_head = 0;
  int64_t q_lora_rank = 0;  // 0: queries straight from attn_q (DeepSeek V2 Lite)
  int64_t kv_lora_rank = 0;
  int64_t head_dim_nope = 0;  // the per-head query part that does not rotate
  int64_t n_rot = 0;          // the rotary part, of queries and of the shared key
  int64_t head_dim_v = 0;     // per head, after attn_v_b
  float norm_eps = 1e-6f;     // of attn_q_a_norm and attn_kv_a_norm

  int64_t head_dim_q() const { return head_dim_nope + n_rot; }
  // The cached key row [latent | rope] and value row [latent]: the layer's KvLayerSpec.
  KvLayerSpec kv_spec() const { return {1, kv_lora_rank + n_rot, kv_lora_rank, 0}; }
};

struct MlaWeights {
  MatrixView wq_a;               // [n_embd, q_lora]; when q_lora_rank > 0
  std::vector<float> q_a_norm;   // [q_lora]
  MatrixView wq_b;               // [q_lora, n_head * head_dim_q]
  MatrixView wq;                 // [n_embd, n_head * head_dim_q]; when q_lora_rank == 0
  MatrixView wkv_a;              // [n_embd, kv_lora + n_rot] attn_kv_a_mqa
  std::vector<float> kv_a_norm;  // [kv_lora]
  std::vector<MatrixView> wk_b;  // n_head × [head_dim_nope, kv_lora]
  std::vector<MatrixView> wv_b;  // n_head × [kv_lora, head_dim_v]
  // wk_b / wv_b as one stack when the heads lie one after another (attn_k_b / attn_v_b of a
  // GGUF, the transposed K of a snapshot): each product is then one matmul_experts over every
  // (token, head) row instead of a matmul per head. count 0: apart (a snapshot's V heads).
  ExpertStack k_b_stack;
  ExpertStack v_b_stack;
  MatrixView wo;  // [n_head * head_dim_v, n_embd]
  // wk_b's bytes when the file has each head's K up-projection untransposed (a Hugging Face
  // snapshot's kv_b_proj, "attn_k_b_t.H"): transposed here once, in its own type.
  std::vector<uint8_t> k_b_storage;
};

// Binds blk.<layer>.attn_{q_a,q_a_norm,q_b | q}, attn_kv_a_mqa, attn_kv_a_norm, attn_k_b,
// attn_v_b and attn_output — or, from a Hugging Face snapshot, the per-head attn_k_b_t.H and
// attn_v_b.H that model/hf_snapshot.cpp cuts from kv_b_proj. Files with the older combined
// attn_kv_b are refused.
MlaWeights bind_mla_attention(WeightBinder& binder, int64_t layer, const MlaShape& shape);

// Scratch of one chunk (n = n_batch), all backend memory.
struct MlaScratch {
  BackendArray<float> q_a;         // [n, q_lora]
  BackendArray<float> q;           // [n, n_head, head_dim_q]
  BackendArray<float> kv;          // [n, kv_lora + n_rot] compressed latent and shared key part
  BackendArray<float> q_pe;        // [n, n_head, n_rot]
  BackendArray<float> k_pe;        // [n, n_rot]
  BackendArray<float> q_nope;      // [n, n_head, head_dim_nope] the queries' non-rotary parts
  BackendArray<float> q_absorb;    // [n, n_head, kv_lora] those parts through attn_k_b
  BackendArray<float> q_head;      // [n, max(head_dim_nope, kv_lora)] one head's rows (no stack)
  BackendArray<float> head;        // [n, max(kv_lora, head_dim_v)] one head's product (no stack)
  BackendArray<float> q_mqa;       // [n, n_head, kv_lora + n_rot] the queries attention reads
  BackendArray<float> k_row;       // [n, kv_lora + n_rot] cached key rows
  BackendArray<float> v_row;       // [n, kv_lora] cached value rows
  BackendArray<float> latent;      // [n, n_head, kv_lora] attention's output
  BackendArray<float> attn;        // [n, n_head * head_dim_v]
  BackendArray<int32_t> head_ids;  // [n, n_head] = h: the stack matrix of each (token, head) row
  void reserve(Backend& backend, const MlaShape& shape, int64_t n_batch);
};

// out [n_tokens, n_embd] = MLA(x [n_tokens, n_embd]); appends each sequence's latent rows to its
// cache's layer `layer`. rope: the rotation of the n_rot parts; scale: of q·k.
void mla_attention(Backend& backend, const MlaWeights& w, const MlaShape& s, const RopeConfig& rope,
                   float scale, std::span<const SequenceRun> sequences, int64_t layer,
                   const float* x, int64_t n_tokens, MlaScratch& scratch, float* out,
                   const Trace& trace);

// mla_attention's three stages, for a caller that acts between them: glm-dsa's indexer reads the
// normed query latent (scratch.q_a) that mla_project leaves and chooses the keys mla_attend reads.
// mla_project: the queries (scratch.q_mqa) and the cache rows (scratch.k_row, scratch.v_row).
void mla_project(Backend& backend, const MlaWeights& w, const MlaShape& s, const RopeConfig& rope,
                 int64_t layer, const float* x, int64_t n_tokens,
                 std::span<const SequenceRun> sequences, MlaScratch& scratch, const Trace& trace);
// Writes each run's rows to its cache and attends into scratch.latent: to every earlier position,
// or, with `keys`, to the positions each row's selection names (blocks/selected_attention).
void mla_attend(Backend& backend, const MlaShape& s, float scale,
                std::span<const SequenceRun> sequences, int64_t layer, MlaScratch& scratch,
                KeySelection* keys);
// out [n_tokens, n_embd]: each head's latent output through attn_v_b, then attn_output.
void mla_output(Backend& backend, const MlaWeights& w, const MlaShape& s, int64_t layer,
                int64_t n_tokens, MlaScratch& scratch, float* out, const Trace& trace);

}  // namespace sluice::model
