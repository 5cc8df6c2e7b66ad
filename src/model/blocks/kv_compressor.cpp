// The compressor, a run at a time: Backend::kv_compress folds the completed blocks (llama.cpp's
// arithmetic: softmax over each channel's entries summed in double and scaled by 1 / Σ, products
// rounded, summed in double) and keeps the unfinished tokens in the state; the keys are then
// RMS-normed, roped and stored by backend ops.
#include "model/blocks/kv_compressor.h"

#include "core/error.h"

namespace sluice::model {
namespace {

// Rotates the rotary tails of n_blocks keys [n_blocks, head_dim], key i at position (first + i)
// * ratio: the tails are spread ratio rows apart in `buffer`, so one rope call over consecutive
// positions rotates each at its own (the rows between are rotated too, and never read).
void rope_blocks(Backend& backend, float* keys, int64_t n_blocks, int64_t first,
                 const KvCompressorShape& s, const RopeConfig& rope, float* buffer) {
  const int64_t n_rot = rope.n_rot, offset = s.head_dim - n_rot, r = s.ratio;
  backend.copy_strided_rows(keys + offset, s.head_dim, buffer, r * n_rot, n_blocks, n_rot);
  backend.rope(buffer, (n_blocks - 1) * r + 1, 1, n_rot, first * r, rope);
  backend.copy_strided_rows(buffer, r * n_rot, keys + offset, s.head_dim, n_blocks, n_rot);
}

}  // namespace

KvCompressorWeights bind_kv_compressor(WeightBinder& binder, int64_t layer, const char* prefix,
                                       const KvCompressorShape& s) {
  const std::string p = prefix;
  KvCompressorWeights w;
  w.wkv = binder.matrix(layer_tensor(layer, (p + "_kv.weight").c_str()), s.n_embd, s.width());
  w.wgate = binder.matrix(layer_tensor(layer, (p + "_gate.weight").c_str()), s.n_embd, s.width());
  // [width, ratio]: one row of position biases per place in the block (kept float32).
  const MatrixView ape =
      binder.matrix(layer_tensor(layer, (p + "_ape.weight").c_str()), s.width(), s.ratio);
  if (ape.type != QType::F32) fail("blk.", layer, ".", p, "_ape.weight: expected F32");
  const float* from = static_cast<const float*>(ape.data);
  w.ape.assign(from, from + s.width() * s.ratio);
  w.norm = binder.vector(layer_tensor(layer, (p + "_norm.weight").c_str()), s.head_dim);
  return w;
}

void KvCompressorScratch::reserve(Backend& backend, const KvCompressorShape& s, int64_t n_batch) {
  kv.resize(backend, size_t(n_batch * s.width()));
  score.resize(backend, size_t(n_batch * s.width()));
  keys.resize(backend, size_t((n_batch / s.ratio + 1) * s.head_dim));
  rope.resize(backend, size_t((n_batch + 1) * s.n_rot));
}

void kv_compress(Backend& backend, const KvCompressorWeights& w, const KvCompressorShape& s,
                 const RopeConfig& rope, std::span<const SequenceRun> sequences,
                 int64_t state_layer, int64_t keys_layer, const float* x, int64_t n,
                 KvCompressorScratch& m) {
  const int64_t width = s.width(), r = s.ratio;
  backend.matmul(w.wkv, x, m.kv.data(), n);
  backend.matmul(w.wgate, x, m.score.data(), n);
  for (const SequenceRun& run : sequences) {
    RecurrentLayerView state = run.kv->recurrent(state_layer, run.pos0);
    const KvLayerView keys = run.kv->layer(keys_layer);
    backend.kv_compress(m.kv.data() + run.row0 * width, m.score.data() + run.row0 * width,
                        w.ape.data(), state.state, run.n_tokens, run.pos0, r, s.head_dim,
                        s.overlap(), m.keys.data());
    const int64_t first = run.pos0 / r, n_blocks = (run.pos0 + run.n_tokens) / r - first;
    if (n_blocks > 0) {
      backend.rms_norm(m.keys.data(), w.norm.data(), m.keys.data(), n_blocks, s.head_dim,
                       s.norm_eps);
      rope_blocks(backend, m.keys.data(), n_blocks, first, s, rope, m.rope.data());
      // A key-only layer: no value columns to write (the keys stand in for them).
      backend.kv_store(keys, m.keys.data(), m.keys.data(), n_blocks, first);
    }
    *state.positions = run.pos0 + run.n_tokens;
  }
}

void rope_tail(Backend& backend, float* x, int64_t n_tokens, int64_t n_head, int64_t head_dim,
               int64_t pos0, const RopeConfig& rope, float* buffer) {
  const int64_t n_rot = rope.n_rot, offset = head_dim - n_rot;
  const int64_t rows = n_tokens * n_head;
  backend.copy_strided_rows(x + offset, head_dim, buffer, n_rot, rows, n_rot);
  backend.rope(buffer, n_tokens, n_head, n_rot, pos0, rope);
  backend.copy_strided_rows(buffer, n_rot, x + offset, head_dim, rows, n_rot);
}

}  // namespace sluice::model
