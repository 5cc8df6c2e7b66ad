// CpuBackend's KV writes and attention. Attention is one pass per (token, head) with an online
// softmax (running max, rescaled sum), so no score buffer of context length is needed and
// nothing is allocated. With an F16 cache it follows llama.cpp's CPU flash attention operation
// for operation (f16_rows.h); with an F32 cache it accumulates in float32. Attention sinks
// (gpt-oss) join the softmax after the last cell, as ggml's flash attention adds them.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/attention_tiled.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/exp_polynomial.h"
#include "backend/cpu/f16_rows.h"
#include "backend/cpu/vec_dot.h"
#include "core/error.h"
#include "core/half.h"

namespace sluice::cpu {
namespace {

constexpr int64_t kMaxHeadDim = 1024;
constexpr int64_t kTile = 64;          // cells per tile of the tiled path
constexpr int64_t kTiledMinRows = 64;  // chunks of this many tokens or more take that path

struct HeadAttention {
  const AttentionCall& call;
  VecDotFn dot_f32;
  const HalfRowKernels& half;

  // One (token, head): online softmax over the positions it sees.
  void run(int64_t t, int64_t h) const {
    const KvLayerView& kv = call.kv;
    const int64_t kv_head = h / (call.n_head / kv.n_head_kv);
    const int64_t pos = call.pos0 + t;
    const int64_t first = call.window > 0 && pos - call.window + 1 > 0 ? pos - call.window + 1 : 0;
    if (kv.type == KvElement::kF16 && call.n_tokens >= kTiledMinRows && kv.head_dim_v % 8 == 0) {
      run_tiled(t, h, kv_head, first, pos);
    } else if (kv.type == KvElement::kF16) {
      run_half(t, h, kv_head, first, pos);
    } else {
      run_float(t, h, kv_head, first, pos);
    }
  }

  float score(float dot) const {
    float s = dot * call.scale;
    if (call.softcap > 0.0f) s = call.softcap * std::tanh(s / call.softcap);
    return s;
  }

  // F16 cells, as llama.cpp's CPU flash attention computes them: the query rounded to half,
  // the value accumulator kept in half and rescaled whenever the running maximum grows, the
  // running sum updated as sum * scale + weight (a product and a sum, each rounded: the project
  // builds with -ffp-contract=off; CUDA's CPU-order kernel does the same).
  void run_half(int64_t t, int64_t h, int64_t kv_head, int64_t first, int64_t pos) const {
    const KvLayerView& kv = call.kv;
    const int64_t dk = kv.head_dim_k;
    const int64_t dv = kv.head_dim_v;
    uint16_t q_half[kMaxHeadDim];
    uint16_t acc[kMaxHeadDim];
    half.to_half(call.q + (t * call.n_head + h) * dk, q_half, dk);
    std::memset(acc, 0, sizeof(uint16_t) * size_t(dv));
    const auto* keys = static_cast<const uint16_t*>(kv.k);
    const auto* values = static_cast<const uint16_t*>(kv.v);
    float max_score = -std::numeric_limits<float>::infinity();
    float sum = 0.0f;
    for (int64_t p = first; p <= pos; ++p) {
      const int64_t cell = p % kv.capacity;
      const float s = score(half.dot(keys + (cell * kv.n_head_kv + kv_head) * dk, q_half, dk));
      float old_scale = 1.0f;
      float weight = 1.0f;
      if (s > max_score) {
        old_scale = std::exp(max_score - s);
        max_score = s;
        half.scale(acc, old_scale, dv);
      } else {
        weight = std::exp(s - max_score);
      }
      half.mad(acc, values + (cell * kv.n_head_kv + kv_head) * dv, weight, dv);
      sum = sum * old_scale + weight;
    }
    float* out = call.out + (t * call.n_head + h) * dv;
    for (int64_t d = 0; d < dv; ++d) out[d] = fp16_to_fp32(acc[d]);
    finish(h, out, max_score, sum, dv);
  }

  // The sink of head h (if any) joins the sum as ggml adds it after the last cell — the float
  // accumulator rescaled when the sink is the new maximum — then out = acc / sum.
  void finish(int64_t h, float* out, float max_score, float sum, int64_t dv) const {
    if (call.sinks != nullptr) {
      const float sink = call.sinks[h];
      if (sink > max_score) {
        const float rescale = std::exp(max_score - sink);
        for (int64_t d = 0; d < dv; ++d) out[d] *= rescale;
        sum = std::fma(sum, rescale, 1.0f);
      } else {
        sum += std::exp(sink - max_score);
      }
    }
    const float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
    for (int64_t d = 0; d < dv; ++d) out[d] *= inv;
  }

  // F16 cells in chunks of 64 or more tokens, as llama.cpp's tiled flash attention computes
  // them: float32 query and keys, cells in tiles of 64 from cell 0, each score one fused
  // multiply-add chain, one maximum and one rescale per tile, the tile's exponentials by the
  // polynomial exp summed per 8 in double, and a float32 value accumulator.
  void run_tiled(int64_t t, int64_t h, int64_t kv_head, int64_t first, int64_t pos) const {
    const KvLayerView& kv = call.kv;
    const int64_t dk = kv.head_dim_k;
    const int64_t dv = kv.head_dim_v;
    const float* q = call.q + (t * call.n_head + h) * dk;
    const auto* keys = static_cast<const uint16_t*>(kv.k);
    const auto* values = static_cast<const uint16_t*>(kv.v);
    float acc[kMaxHeadDim];
    std::memset(acc, 0, sizeof(float) * size_t(dv));
    float max_score = -std::numeric_limits<float>::infinity();
    float sum = 0.0f;
    float weights[kTile];
    for (int64_t tile = first - first % kTile; tile <= pos; tile += kTile) {
      float tile_max = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < kTile; ++j) {
        const int64_t p = tile + j;
        if (p < first || p > pos) {
          weights[j] = -std::numeric_limits<float>::infinity();
          continue;
        }
        const uint16_t* k = keys + ((p % kv.capacity) * kv.n_head_kv + kv_head) * dk;
        float s = 0.0f;
        for (int64_t d = 0; d < dk; ++d) s = std::fma(q[d], fp16_to_fp32(k[d]), s);
        s *= call.scale;
        if (call.softcap > 0.0f) s = call.softcap * std::tanh(s / call.softcap);
        weights[j] = s;
        tile_max = std::fmax(tile_max, s);
      }
      if (tile_max == -std::numeric_limits<float>::infinity()) continue;
      const float new_max = std::fmax(max_score, tile_max);
      if (new_max > max_score) {
        const float rescale = std::exp(max_score - new_max);
        for (int64_t d = 0; d < dv; ++d) acc[d] *= rescale;
        sum *= rescale;
      }
      max_score = new_max;
      double tile_sum = 0.0;
      for (int64_t j = 0; j < kTile; j += 8) {
        float e[8];
        for (int l = 0; l < 8; ++l) e[l] = exp_polynomial(weights[j + l] - new_max);
        // The 8 lanes summed as the vector code does: halves, then pairs, then the last two.
        const float h0 = e[0] + e[4], h1 = e[1] + e[5], h2 = e[2] + e[6], h3 = e[3] + e[7];
        tile_sum += double((h0 + h2) + (h1 + h3));
        for (int l = 0; l < 8; ++l) weights[j + l] = e[l];
      }
      sum = float(double(sum) + tile_sum);
      for (int64_t j = 0; j < kTile; ++j) {
        const int64_t p = tile + j;
        if (p < first || p > pos) continue;  // weight 0: adds nothing to any accumulator
        const uint16_t* v = values + ((p % kv.capacity) * kv.n_head_kv + kv_head) * dv;
        for (int64_t d = 0; d < dv; ++d) acc[d] = std::fma(weights[j], fp16_to_fp32(v[d]), acc[d]);
      }
    }
    float* out = call.out + (t * call.n_head + h) * dv;
    std::memcpy(out, acc, sizeof(float) * size_t(dv));
    finish(h, out, max_score, sum, dv);
  }

  // F32 cells: the same online softmax with a float accumulator; a sink starts it as one more
  // score with a zero value (ggml's soft_max takes it into the maximum and the sum).
  void run_float(int64_t t, int64_t h, int64_t kv_head, int64_t first, int64_t pos) const {
    const KvLayerView& kv = call.kv;
    const int64_t dk = kv.head_dim_k;
    const int64_t dv = kv.head_dim_v;
    const float* q = call.q + (t * call.n_head + h) * dk;
    float acc[kMaxHeadDim];
    std::memset(acc, 0, sizeof(float) * size_t(dv));
    float max_score = -std::numeric_limits<float>::infinity();
    float sum = 0.0f;
    if (call.sinks != nullptr) {
      max_score = call.sinks[h];
      sum = 1.0f;
    }
    for (int64_t p = first; p <= pos; ++p) {
      const int64_t cell = p % kv.capacity;
      const float* k = static_cast<const float*>(kv.k) + (cell * kv.n_head_kv + kv_head) * dk;
      const float* v = static_cast<const float*>(kv.v) + (cell * kv.n_head_kv + kv_head) * dv;
      const float s = score(dot_f32(k, q, dk));
      if (s > max_score) {
        const float rescale = std::exp(max_score - s);  // 0 on the first position
        for (int64_t d = 0; d < dv; ++d) acc[d] *= rescale;
        sum *= rescale;
        max_score = s;
      }
      const float weight = std::exp(s - max_score);
      sum += weight;
      for (int64_t d = 0; d < dv; ++d) acc[d] += weight * v[d];
    }
    float* out = call.out + (t * call.n_head + h) * dv;
    const float inv = 1.0f / sum;
    for (int64_t d = 0; d < dv; ++d) out[d] = acc[d] * inv;
  }
};

}  // namespace

void CpuBackend::kv_store(const KvLayerView& kv, const float* k, const float* v, int64_t n_tokens,
                          int64_t pos0) {
  const int64_t k_row = kv.n_head_kv * kv.head_dim_k;
  const int64_t v_row = kv.n_head_kv * kv.head_dim_v;
  const auto to_half = half_row_kernels().to_half;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t cell = (pos0 + t) % kv.capacity;
    if (kv.type == KvElement::kF16) {
      to_half(k + t * k_row, static_cast<uint16_t*>(kv.k) + cell * k_row, k_row);
      to_half(v + t * v_row, static_cast<uint16_t*>(kv.v) + cell * v_row, v_row);
    } else {
      std::memcpy(static_cast<float*>(kv.k) + cell * k_row, k + t * k_row, sizeof(float) * k_row);
      std::memcpy(static_cast<float*>(kv.v) + cell * v_row, v + t * v_row, sizeof(float) * v_row);
    }
  }
}

void CpuBackend::attention(const AttentionCall& call) {
  const KvLayerView& kv = call.kv;
  if (kv.head_dim_k > kMaxHeadDim || kv.head_dim_v > kMaxHeadDim) {
    fail("attention: head dimension ", kv.head_dim_k, "/", kv.head_dim_v, " exceeds ", kMaxHeadDim);
  }
  if (kv.n_head_kv <= 0 || call.n_head % kv.n_head_kv != 0) {
    fail("attention: ", call.n_head, " query heads do not group over ", kv.n_head_kv, " KV heads");
  }
  const HeadAttention head{call, vec_dot_kernel(QType::F32).fn, half_row_kernels()};
  const bool tiled =
      kv.type == KvElement::kF16 && call.n_tokens >= kTiledMinRows && kv.head_dim_v % 8 == 0;
  // The AVX2 kernel has no sinks; with them the scalar run_tiled computes the same numbers.
  if (tiled && call.sinks == nullptr && isa_supported(CpuIsa::kAvx2) &&
      kv.head_dim_k <= kTiledMaxHeadDim && kv.head_dim_v <= kTiledMaxHeadDim) {
    // Work items: (head, block of 64 query rows); each converts a tile's keys and values once.
    const int64_t n_blocks = (call.n_tokens + kTiledBlockRows - 1) / kTiledBlockRows;
    parallel(call.n_head * n_blocks, 1, [&](int64_t lo, int64_t hi) {
      // Per-thread scratch of the kernel (about 200 KB), never shared between threads.
      thread_local TiledScratch scratch;
      for (int64_t i = lo; i < hi; ++i) {
        const int64_t h = i / n_blocks;
        const int64_t t0 = (i % n_blocks) * kTiledBlockRows;
        attention_tiled_rows_avx2(call, h, t0, std::min(t0 + kTiledBlockRows, call.n_tokens),
                                  scratch);
      }
    });
    return;
  }
  const int64_t n_items = call.n_tokens * call.n_head;
  parallel(n_items, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) head.run(i / call.n_head, i % call.n_head);
  });
}

}  // namespace sluice::cpu
