// CpuBackend's DeepSeek sparse attention ops (glm-dsa): the lightning indexer's LayerNorm,
// scores and top-k choice, and attention restricted to the chosen cells. Each is the host loop
// model/blocks/dsa_indexer.cpp and selected_attention.cpp ran before they became ops, step for
// step, so the CPU's numbers did not move: the scores' q · k through matmul over the keys as
// float32, ggml's LayerNorm order, std::partial_sort's choice, attention() over gathered cells.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/half.h"

namespace sluice::cpu {
namespace {

// At most this many q · k products are held at once (a block of query rows against every key).
constexpr int64_t kMaxDots = int64_t(1) << 22;

size_t cell_bytes(const KvLayerView& kv, int64_t head_dim) {
  return size_t(kv.n_head_kv * head_dim) * (kv.type == KvElement::kF16 ? 2 : 4);
}

}  // namespace

void CpuBackend::layer_norm(const float* x, const float* weight, const float* bias, float* y,
                            int64_t n_rows, int64_t n, float eps) {
  if (n <= 0) return;
  parallel(n_rows, row_chunk(n_rows), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const float* in = x + r * n;
      float* out = y + r * n;
      double sum = 0.0;
      for (int64_t i = 0; i < n; ++i) sum += double(in[i]);
      const float mean = float(sum) / float(n);
      double squares = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        out[i] = in[i] - mean;
        squares += double(out[i] * out[i]);
      }
      const float scale = 1.0f / std::sqrt(float(squares / double(n)) + eps);
      for (int64_t i = 0; i < n; ++i) {
        float v = out[i] * scale;
        if (weight != nullptr) v = v * weight[i];
        if (bias != nullptr) v = v + bias[i];
        out[i] = v;
      }
    }
  });
}

void CpuBackend::indexer_scores(const float* q, const float* w, const KvLayerView& kv,
                                int64_t n_tokens, int64_t n_head, int64_t pos0, float* scores) {
  if (kv.n_head_kv != 1 || kv.capacity <= 0 || pos0 < 0 || n_head <= 0) {
    fail("indexer_scores: ", kv.n_head_kv, " KV heads, capacity ", kv.capacity, ", position ", pos0,
         ", ", n_head, " heads");
  }
  if (n_tokens <= 0) return;
  const int64_t d = kv.head_dim_k;
  const int64_t n_keys = pos0 + n_tokens;
  // Every key the rows can see, as float32 (llama.cpp converts F16 cells the same way).
  indexer_keys_.resize(size_t(n_keys * d));
  for (int64_t p = 0; p < n_keys; ++p) {
    const int64_t cell = p % kv.capacity;
    float* to = indexer_keys_.data() + p * d;
    if (kv.type == KvElement::kF16) {
      const uint16_t* from = static_cast<const uint16_t*>(kv.k) + cell * d;
      for (int64_t i = 0; i < d; ++i) to[i] = fp16_to_fp32(from[i]);
    } else {
      std::memcpy(to, static_cast<const float*>(kv.k) + cell * d, sizeof(float) * size_t(d));
    }
  }
  const MatrixView key_rows{QType::F32, indexer_keys_.data(), d, n_keys};
  const int64_t block = std::max<int64_t>(1, kMaxDots / (n_head * n_keys));
  for (int64_t t0 = 0; t0 < n_tokens; t0 += block) {
    const int64_t rows = std::min(block, n_tokens - t0);
    indexer_dots_.resize(size_t(rows * n_head * n_keys));
    const float* dots = indexer_dots_.data();
    matmul(key_rows, q + t0 * n_head * d, indexer_dots_.data(), rows * n_head);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t t = t0 + r;
      const int64_t visible = pos0 + t + 1;
      const float* weights = w + t * n_head;
      float* row = scores + t * n_keys;
      for (int64_t j = 0; j < visible; ++j) {
        float score = 0.0f;
        for (int64_t h = 0; h < n_head; ++h) {
          score += std::max(dots[(r * n_head + h) * n_keys + j], 0.0f) * weights[h];
        }
        row[j] = score;
      }
      std::fill(row + visible, row + n_keys, -std::numeric_limits<float>::infinity());
    }
  }
}

void CpuBackend::top_k_positions(const float* scores, int64_t n_rows, int64_t n_cols, int64_t pos0,
                                 int64_t top_k, int32_t* positions) {
  if (top_k <= 0 || pos0 < 0) fail("top_k_positions: top_k ", top_k, ", position ", pos0);
  top_k_order_.resize(size_t(std::max<int64_t>(n_cols, 0)));
  for (int64_t t = 0; t < n_rows; ++t) {
    const int64_t visible = std::min(n_cols, pos0 + t + 1);
    int32_t* out = positions + t * top_k;
    if (visible <= top_k) {
      std::iota(out, out + visible, 0);
      std::fill(out + visible, out + top_k, -1);
      continue;
    }
    // The top_k columns by score (the earlier column first on a tie), then in column order.
    const float* row = scores + t * n_cols;
    int32_t* order = top_k_order_.data();
    std::iota(order, order + visible, 0);
    std::partial_sort(order, order + top_k, order + visible, [&](int32_t a, int32_t b) {
      const float sa = row[a], sb = row[b];
      return sa > sb || (sa == sb && a < b);
    });
    std::sort(order, order + top_k);
    std::copy_n(order, top_k, out);
  }
}

// Each row's chosen cells copied, in order, into a cache of their own, which the row's query
// then reads whole (it sits at the last of them).
void CpuBackend::attention_selected(const AttentionCall& call, const int32_t* positions,
                                    int64_t top_k) {
  const KvLayerView& kv = call.kv;
  if (call.window != 0 || call.sinks != nullptr || top_k <= 0 || kv.capacity <= 0) {
    fail("attention_selected: window ", call.window, ", top_k ", top_k, ", capacity ", kv.capacity,
         (call.sinks != nullptr ? ", sinks" : ""));
  }
  const size_t k_cell = cell_bytes(kv, kv.head_dim_k);
  const size_t v_cell = cell_bytes(kv, kv.head_dim_v);
  selected_cells_.resize(size_t(top_k) * (k_cell + v_cell));
  uint8_t* keys = selected_cells_.data();
  uint8_t* values = keys + size_t(top_k) * k_cell;
  const int64_t q_row = call.n_head * kv.head_dim_k;
  const int64_t out_row = call.n_head * kv.head_dim_v;
  for (int64_t t = 0; t < call.n_tokens; ++t) {
    const int32_t* chosen = positions + t * top_k;
    for (int64_t j = 0; j < top_k; ++j) {
      if (chosen[j] < 0 || chosen[j] > call.pos0 + t) {
        fail("attention_selected: row ", t, " chose position ", chosen[j], " (it sits at ",
             call.pos0 + t, ")");
      }
      const int64_t cell = chosen[j] % kv.capacity;
      std::memcpy(keys + size_t(j) * k_cell, static_cast<const uint8_t*>(kv.k) + cell * k_cell,
                  k_cell);
      std::memcpy(values + size_t(j) * v_cell, static_cast<const uint8_t*>(kv.v) + cell * v_cell,
                  v_cell);
    }
    AttentionCall row = call;
    row.q = call.q + t * q_row;
    row.out = call.out + t * out_row;
    row.n_tokens = 1;
    row.pos0 = top_k - 1;
    row.kv.k = keys;
    row.kv.v = values;
    row.kv.capacity = top_k;
    attention(row);
  }
}

}  // namespace sluice::cpu
