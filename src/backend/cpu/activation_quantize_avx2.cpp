// The Q8_0 / Q8_1 activation quantizers (activation_quantize.h) with AVX2, one 32-element block
// in four registers: the largest magnitude (max is exact, and a NaN is skipped as std::fmax skips
// it), the scalar code's scale and inverse, x * id rounded half to even, the quants packed in
// order. The same bytes as the scalar loop.
#include <immintrin.h>

#include "backend/cpu/activation_quantize.h"
#include "core/half.h"
#include "quant/blocks.h"

namespace sluice::cpu {
namespace {

struct Block32 {
  float d;       // amax / 127
  __m256i q[4];  // the quants of elements 8k .. 8k + 7 as int32
};

Block32 quantize_block(const float* x) {
  __m256 v[4];
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int k = 0; k < 4; ++k) {
    v[k] = _mm256_loadu_ps(x + 8 * k);
    m = _mm256_max_ps(_mm256_andnot_ps(sign, v[k]), m);  // a NaN |x| gives m: skipped
  }
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  const float amax = _mm_cvtss_f32(h);
  const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
  Block32 b;
  b.d = amax / 127.0f;
  for (int k = 0; k < 4; ++k) {
    const __m256 scaled =
        _mm256_round_ps(_mm256_mul_ps(v[k], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    b.q[k] = _mm256_cvtps_epi32(scaled);
  }
  return b;
}

// The 32 quants as int8 in element order (|q| <= 127: the saturating packs keep them).
void store_quants(const Block32& b, int8_t* qs) {
  const __m256i words =
      _mm256_packs_epi16(_mm256_packs_epi32(b.q[0], b.q[1]), _mm256_packs_epi32(b.q[2], b.q[3]));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), _mm256_permutevar8x32_epi32(words, order));
}

int sum_quants(const Block32& b) {
  const __m256i s =
      _mm256_add_epi32(_mm256_add_epi32(b.q[0], b.q[1]), _mm256_add_epi32(b.q[2], b.q[3]));
  __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
  return _mm_cvtsi128_si32(h);
}

}  // namespace

void quantize_activations_q8_0_avx2(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK8_0; ++i, src += kQK8_0) {
    const Block32 b = quantize_block(src);
    blocks[i].d = fp32_to_fp16(b.d);
    store_quants(b, blocks[i].qs);
  }
}

void quantize_activations_q8_1_avx2(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < n / kQK8_1; ++i, src += kQK8_1) {
    const Block32 b = quantize_block(src);
    store_quants(b, blocks[i].qs);
    blocks[i].d = fp32_to_fp16(b.d);
    blocks[i].s = fp32_to_fp16(b.d * float(sum_quants(b)));
  }
}

}  // namespace sluice::cpu
