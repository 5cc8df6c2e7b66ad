// The KV compressor of DeepSeek V4's compressed attention: every `ratio` consecutive tokens fold
// into one key. Each token contributes a candidate row (attn_compressor_kv · x) and per-channel
// scores (attn_compressor_gate · x + ape[position % ratio]); when a block of ratio tokens is
// complete, each channel of its key is the softmax(scores)-weighted sum of the candidates, then
// RMS-normed and roped (its last n_rot dimensions, at the block's first position). With ratio 4
// the blocks overlap: the candidate and score rows are twice as wide, and a block's softmax runs
// over 2·ratio entries — the previous block's tokens through the first half of the channels, its
// own through the second (nothing before block 0). The tokens of the unfinished block (and, when
// overlapping, of the block before) are kept in a float32 state, a recurrent KV layer of its own;
// block b's key goes to cell b of a key-only KV layer. Knows no architecture.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/backend_array.h"
#include "model/kv_cache.h"
#include "model/weights.h"

namespace sluice::model {

struct KvCompressorShape {
  int64_t n_embd = 0;
  int64_t head_dim = 0;  // of the compressed key
  int64_t ratio = 0;     // tokens per key
  int64_t n_rot = 0;     // trailing dimensions that rotate
  float norm_eps = 1e-6f;

  bool overlap() const { return ratio == 4; }
  int64_t width() const { return (overlap() ? 2 : 1) * head_dim; }  // of a candidate row
  int64_t span() const { return (overlap() ? 2 : 1) * ratio; }      // tokens kept in the state
  KvLayerSpec state_spec() const { return {0, 0, 0, 0, 0, span() * 2 * width()}; }
  KvLayerSpec keys_spec() const { return {1, head_dim, 0, 0}; }
};

struct KvCompressorWeights {
  MatrixView wkv;           // [n_embd, width]
  MatrixView wgate;         // [n_embd, width]
  std::vector<float> ape;   // [ratio, width]
  std::vector<float> norm;  // [head_dim]
};

// blk.<layer>.<prefix>_{kv,gate,ape,norm}.weight, e.g. prefix "attn_compressor".
KvCompressorWeights bind_kv_compressor(WeightBinder& binder, int64_t layer, const char* prefix,
                                       const KvCompressorShape& shape);

// Backend memory.
struct KvCompressorScratch {
  BackendArray<float> kv, score;  // [n_batch, width]
  BackendArray<float> keys;       // [n_batch / ratio + 1, head_dim] the blocks a run completes
  BackendArray<float> rope;       // [n_batch + 1, n_rot] their rotary parts, ratio rows apart
  void reserve(Backend& backend, const KvCompressorShape& shape, int64_t n_batch);
};

// Feeds the rows x [n_tokens, n_embd] of the chunk (the attention's normed input) through the
// compressor: for every run, its tokens join the state (KV layer state_layer of its cache) and
// every block they complete writes its key to KV layer keys_layer. rope: the keys' rotation.
// Backend ops only (Backend::kv_compress, rms_norm, rope, kv_store).
void kv_compress(Backend& backend, const KvCompressorWeights& w, const KvCompressorShape& s,
                 const RopeConfig& rope, std::span<const SequenceRun> sequences,
                 int64_t state_layer, int64_t keys_layer, const float* x, int64_t n_tokens,
                 KvCompressorScratch& scratch);

// Rotates the last n_rot of head_dim dimensions of x [n_tokens, n_head, head_dim] in place,
// token t at position pos0 + t; `buffer` (backend memory, as x) holds n_tokens * n_head * n_rot
// floats.
void rope_tail(Backend& backend, float* x, int64_t n_tokens, int64_t n_head, int64_t head_dim,
               int64_t pos0, const RopeConfig& rope, float* buffer);

}  // namespace sluice::model
