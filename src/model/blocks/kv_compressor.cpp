// The compressor, a token at a time through its state, in llama.cpp's arithmetic: softmax over
// each channel's entries summed in double and scaled by 1 / Σ, products rounded, summed in double.
#include "model/blocks/kv_compressor.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/half.h"

namespace sluice::model {
namespace {

// Block b's key into `key` from the state's rows (row of position p at p % span: the candidate
// row, then the score row, each of width()).
void compress_block(const KvCompressorShape& s, const float* state, int64_t block,
                    KvCompressorScratch& m) {
  const int64_t r = s.ratio, d = s.head_dim, width = s.width(), span = s.span();
  const int64_t n_entries = s.overlap() ? 2 * r : r;
  const auto row = [&](int64_t position) { return state + (position % span) * 2 * width; };
  m.entries.resize(size_t(2 * n_entries));
  float* score = m.entries.data();
  float* value = score + n_entries;
  for (int64_t c = 0; c < d; ++c) {
    for (int64_t e = 0; e < n_entries; ++e) {
      if (s.overlap() && e < r) {
        // The previous block's token e, through the first half of the channels.
        if (block == 0) {
          value[e] = 0.0f;
          score[e] = -INFINITY;
        } else {
          const float* from = row((block - 1) * r + e);
          value[e] = from[c];
          score[e] = from[width + c];
        }
        continue;
      }
      const int64_t j = s.overlap() ? e - r : e;
      const int64_t offset = s.overlap() ? d : 0;
      const float* from = row(block * r + j);
      value[e] = from[offset + c];
      score[e] = from[width + offset + c];
    }
    float max = -INFINITY;
    for (int64_t e = 0; e < n_entries; ++e) max = std::fmax(max, score[e]);
    double total = 0.0;
    for (int64_t e = 0; e < n_entries; ++e) {
      score[e] = std::exp(score[e] - max);
      total += double(score[e]);
    }
    const float inv = float(1.0 / total);
    double sum = 0.0;
    for (int64_t e = 0; e < n_entries; ++e) {
      const float weight = score[e] * inv;
      sum += double(value[e] * weight);
    }
    m.key[size_t(c)] = float(sum);
  }
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

void KvCompressorScratch::reserve(const KvCompressorShape& s, int64_t n_batch) {
  kv.resize(size_t(n_batch * s.width()));
  score.resize(size_t(n_batch * s.width()));
  key.resize(size_t(s.head_dim));
}

void kv_compress(Backend& backend, const KvCompressorWeights& w, const KvCompressorShape& s,
                 const RopeConfig& rope, std::span<const SequenceRun> sequences,
                 int64_t state_layer, int64_t keys_layer, const float* x, int64_t n,
                 KvCompressorScratch& m) {
  const int64_t width = s.width(), r = s.ratio;
  backend.matmul(w.wkv, x, m.kv.data(), n);
  backend.matmul(w.wgate, x, m.score.data(), n);
  std::vector<float> rope_buffer;
  for (const SequenceRun& run : sequences) {
    RecurrentLayerView state = run.kv->recurrent(state_layer, run.pos0);
    const KvLayerView keys = run.kv->layer(keys_layer);
    for (int64_t t = 0; t < run.n_tokens; ++t) {
      const int64_t pos = run.pos0 + t, row = run.row0 + t;
      float* to = state.state + (pos % s.span()) * 2 * width;
      std::memcpy(to, m.kv.data() + row * width, sizeof(float) * size_t(width));
      const float* score = m.score.data() + row * width;
      const float* ape = w.ape.data() + (pos % r) * width;
      for (int64_t i = 0; i < width; ++i) to[width + i] = score[i] + ape[i];
      if ((pos + 1) % r != 0) continue;
      const int64_t block = pos / r;
      compress_block(s, state.state, block, m);
      backend.rms_norm(m.key.data(), w.norm.data(), m.key.data(), 1, s.head_dim, s.norm_eps);
      rope_tail(backend, m.key.data(), 1, 1, s.head_dim, block * r, rope, rope_buffer);
      store_key_rows(keys, m.key.data(), 1, block);
    }
    *state.positions = run.pos0 + run.n_tokens;
  }
}

void rope_tail(Backend& backend, float* x, int64_t n_tokens, int64_t n_head, int64_t head_dim,
               int64_t pos0, const RopeConfig& rope, std::vector<float>& buffer) {
  const int64_t n_rot = rope.n_rot, offset = head_dim - n_rot;
  const int64_t rows = n_tokens * n_head;
  buffer.resize(size_t(rows * n_rot));
  for (int64_t i = 0; i < rows; ++i) {
    std::memcpy(buffer.data() + i * n_rot, x + i * head_dim + offset,
                sizeof(float) * size_t(n_rot));
  }
  backend.rope(buffer.data(), n_tokens, n_head, n_rot, pos0, rope);
  for (int64_t i = 0; i < rows; ++i) {
    std::memcpy(x + i * head_dim + offset, buffer.data() + i * n_rot,
                sizeof(float) * size_t(n_rot));
  }
}

void store_key_rows(const KvLayerView& kv, const float* rows, int64_t n_rows, int64_t first_cell) {
  const int64_t d = kv.n_head_kv * kv.head_dim_k;
  for (int64_t t = 0; t < n_rows; ++t) {
    const int64_t cell = (first_cell + t) % kv.capacity;
    if (kv.type == KvElement::kF16) {
      uint16_t* to = static_cast<uint16_t*>(kv.k) + cell * d;
      for (int64_t i = 0; i < d; ++i) to[i] = fp32_to_fp16(rows[t * d + i]);
    } else {
      std::memcpy(static_cast<float*>(kv.k) + cell * d, rows + t * d, sizeof(float) * size_t(d));
    }
  }
}

}  // namespace sluice::model
