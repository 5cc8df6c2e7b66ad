// The tiled flash-attention path (cpu_attention.cpp's run_tiled, llama.cpp's tiled kernel) with
// AVX2: a block of query rows of one head walks the cells in tiles of 64; each tile's keys and
// values are converted to float once for the whole block; scores are 8 cells per register, each
// lane its own fused chain over the head dimension; values accumulate 8 dimensions per register,
// cell by cell. Lane for lane this is the scalar algorithm, so results are identical to it.
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/attention_tiled.h"
#include "backend/cpu/exp_polynomial_avx2.h"

namespace sluice::cpu {
namespace {

constexpr int64_t kTile = 64;

// (h0 + h2) + (h1 + h3) with h = high half + low half: llama.cpp's order for a lane sum.
float sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace

void attention_tiled_rows_avx2(const AttentionCall& call, int64_t h, int64_t t_begin, int64_t t_end,
                               TiledScratch& scratch) {
  const KvLayerView& kv = call.kv;
  const int64_t dk = kv.head_dim_k;
  const int64_t dv = kv.head_dim_v;
  const int64_t kv_head = h / (call.n_head / kv.n_head_kv);
  const int64_t n_rows = t_end - t_begin;
  const float inf = std::numeric_limits<float>::infinity();
  auto first_of = [&](int64_t t) {
    const int64_t pos = call.pos0 + t;
    return call.window > 0 && pos - call.window + 1 > 0 ? pos - call.window + 1 : int64_t(0);
  };
  for (int64_t r = 0; r < n_rows; ++r) {
    scratch.max_score[r] = -inf;
    scratch.sum[r] = 0.0f;
    std::memset(scratch.acc + r * dv, 0, sizeof(float) * size_t(dv));
  }
  const int64_t lowest = first_of(t_begin);
  const int64_t highest = call.pos0 + t_end - 1;
  float* k_t = scratch.keys;    // [dk, 64] keys of the tile, transposed
  float* v_f = scratch.values;  // [64, dv]
  for (int64_t tile = lowest - lowest % kTile; tile <= highest; tile += kTile) {
    const int64_t n_cells = std::min<int64_t>(kTile, highest - tile + 1);
    for (int64_t j = 0; j < kTile; ++j) {
      const int64_t p = tile + j;
      if (j >= n_cells || p < lowest) {
        for (int64_t d = 0; d < dk; ++d) k_t[d * kTile + j] = 0.0f;
        continue;
      }
      const int64_t cell = (p % kv.capacity) * kv.n_head_kv + kv_head;
      const uint16_t* k = static_cast<const uint16_t*>(kv.k) + cell * dk;
      const uint16_t* v = static_cast<const uint16_t*>(kv.v) + cell * dv;
      for (int64_t d = 0; d < dk; ++d) k_t[d * kTile + j] = _cvtsh_ss(k[d]);
      for (int64_t d = 0; d < dv; d += 8) {
        _mm256_storeu_ps(v_f + j * dv + d,
                         _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + d))));
      }
    }
    for (int64_t r = 0; r < n_rows; ++r) {
      const int64_t t = t_begin + r;
      const int64_t pos = call.pos0 + t;
      const int64_t first = first_of(t);
      if (tile > pos || tile + kTile <= first) continue;
      const float* q = call.q + (t * call.n_head + h) * dk;
      alignas(32) float w[kTile];
      float tile_max = -inf;
      for (int64_t j0 = 0; j0 < kTile; j0 += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int64_t d = 0; d < dk; ++d) {
          acc = _mm256_fmadd_ps(_mm256_set1_ps(q[d]), _mm256_loadu_ps(k_t + d * kTile + j0), acc);
        }
        _mm256_store_ps(w + j0, _mm256_mul_ps(acc, _mm256_set1_ps(call.scale)));
        for (int64_t l = 0; l < 8; ++l) {
          const int64_t p = tile + j0 + l;
          if (p < first || p > pos) {
            w[j0 + l] = -inf;
          } else {
            if (call.softcap > 0.0f) w[j0 + l] = call.softcap * std::tanh(w[j0 + l] / call.softcap);
            tile_max = std::fmax(tile_max, w[j0 + l]);
          }
        }
      }
      if (tile_max == -inf) continue;
      float* acc = scratch.acc + r * dv;
      const float new_max = std::fmax(scratch.max_score[r], tile_max);
      if (new_max > scratch.max_score[r]) {
        const float rescale = std::exp(scratch.max_score[r] - new_max);
        const __m256 vr = _mm256_set1_ps(rescale);
        for (int64_t d = 0; d < dv; d += 8) {
          _mm256_storeu_ps(acc + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), vr));
        }
        scratch.sum[r] *= rescale;
      }
      scratch.max_score[r] = new_max;
      double tile_sum = 0.0;
      for (int64_t j0 = 0; j0 < kTile; j0 += 8) {
        const __m256 e =
            exp_polynomial8(_mm256_sub_ps(_mm256_load_ps(w + j0), _mm256_set1_ps(new_max)));
        _mm256_store_ps(w + j0, e);
        tile_sum += double(sum8(e));
      }
      scratch.sum[r] = float(double(scratch.sum[r]) + tile_sum);
      const int64_t j_lo = std::max<int64_t>(0, first - tile);
      const int64_t j_hi = std::min<int64_t>(kTile, pos - tile + 1);
      for (int64_t d = 0; d < dv; d += 8) {
        __m256 a = _mm256_loadu_ps(acc + d);
        for (int64_t j = j_lo; j < j_hi; ++j) {
          a = _mm256_fmadd_ps(_mm256_set1_ps(w[j]), _mm256_loadu_ps(v_f + j * dv + d), a);
        }
        _mm256_storeu_ps(acc + d, a);
      }
    }
  }
  for (int64_t r = 0; r < n_rows; ++r) {
    const int64_t t = t_begin + r;
    float* out = call.out + (t * call.n_head + h) * dv;
    const float inv = scratch.sum[r] == 0.0f ? 0.0f : 1.0f / scratch.sum[r];
    for (int64_t d = 0; d < dv; ++d) out[d] = scratch.acc[r * dv + d] * inv;
  }
}

}  // namespace sluice::cpu
