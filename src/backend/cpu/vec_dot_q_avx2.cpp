// AVX2 dot products of the 32-element block types against Q8_0 / Q8_1 activations: Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4. One block is one 256-bit register of int8; its
// integer sum is scaled in float and accumulated in 8 float lanes (two accumulators hide the
// FMA latency), so results differ from the reference only by float summation order.
#include "backend/cpu/avx2_util.h"
#include "backend/cpu/vec_dot_table.h"
#include "quant/blocks.h"
#include "quant/iq_tables.h"

namespace sluice::cpu {
namespace {

// Scalar E8M0 decode (as quant/float_formats.h); kept local so no shared inline function is
// compiled with AVX2 flags.
float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (uint32_t(e - 1) << 23);
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// The shared loop: `block_sum(ib)` returns the 8 int32 partial sums of block ib and
// `block_scale(ib)` its float scale; two accumulators alternate between blocks.
template <class BlockSum, class BlockScale>
float accumulate_blocks(int64_t n_blocks, BlockSum block_sum, BlockScale block_scale) {
  __m256 acc0 = _mm256_setzero_ps();
  __m256 acc1 = _mm256_setzero_ps();
  int64_t ib = 0;
  for (; ib + 1 < n_blocks; ib += 2) {
    acc0 =
        _mm256_fmadd_ps(_mm256_set1_ps(block_scale(ib)), _mm256_cvtepi32_ps(block_sum(ib)), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_set1_ps(block_scale(ib + 1)),
                           _mm256_cvtepi32_ps(block_sum(ib + 1)), acc1);
  }
  if (ib < n_blocks) {
    acc0 =
        _mm256_fmadd_ps(_mm256_set1_ps(block_scale(ib)), _mm256_cvtepi32_ps(block_sum(ib)), acc0);
  }
  return hsum_ps(_mm256_add_ps(acc0, acc1));
}

// Q8_0 and Q4_1 accumulate in one register, block by block, with Q4_1's minimum terms summed
// alongside: the order of ggml's x86 kernels, so these two types (the activations and most
// weights of the default model) round exactly as llama.cpp does.
// One accumulator, blocks in order: ggml's x86 order for Q4_0, Q5_0 and Q5_1 (IQ4_NL and MXFP4
// alternate two accumulators there, as accumulate_blocks does).
template <class BlockSum, class BlockScale>
float accumulate_blocks_in_order(int64_t n_blocks, BlockSum block_sum, BlockScale block_scale) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t ib = 0; ib < n_blocks; ++ib) {
    acc = _mm256_fmadd_ps(_mm256_set1_ps(block_scale(ib)), _mm256_cvtepi32_ps(block_sum(ib)), acc);
  }
  return hsum_ps(acc);
}

float dot_q8_0(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ8_0*>(w);  // [n / 32]
  const auto* xb = static_cast<const BlockQ8_0*>(x);  // [n / 32]
  __m256 acc = _mm256_setzero_ps();
  for (int64_t ib = 0; ib < n / kQK8_0; ++ib) {
    const __m256 d = _mm256_set1_ps(half_to_float(wb[ib].d) * half_to_float(xb[ib].d));
    const __m256i sums = madd_s8_s8(loadu256(wb[ib].qs), loadu256(xb[ib].qs));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sums), acc);
  }
  return hsum_ps(acc);
}

float dot_q4_0(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ4_0*>(w);  // [n / 32]
  const auto* xb = static_cast<const BlockQ8_0*>(x);  // [n / 32]
  return accumulate_blocks_in_order(
      n / kQK4_0,
      [&](int64_t ib) { return madd_s8_s8(q4_0_weights(wb[ib].qs), loadu256(xb[ib].qs)); },
      [&](int64_t ib) { return half_to_float(wb[ib].d) * half_to_float(xb[ib].d); });
}

// Q4_1 / Q5_1: unsigned quants, so u8 x s8 directly; the minimum adds m * s per block.
float dot_q4_1(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ4_1*>(w);  // [n / 32]
  const auto* xb = static_cast<const BlockQ8_1*>(x);  // [n / 32]
  __m256 acc = _mm256_setzero_ps();
  float sum_min = 0.0f;
  for (int64_t ib = 0; ib < n / kQK4_1; ++ib) {
    sum_min += half_to_float(wb[ib].m) * half_to_float(xb[ib].s);
    const __m256 d = _mm256_mul_ps(_mm256_set1_ps(half_to_float(wb[ib].d)),
                                   _mm256_set1_ps(half_to_float(xb[ib].d)));
    const __m256i sums = madd_u8_s8(unpack_nibbles(wb[ib].qs), loadu256(xb[ib].qs));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sums), acc);
  }
  return hsum_ps(acc) + sum_min;
}

// Q4_1 against up to four tokens with the activation scales read as floats (VecDotScaledFn):
// the operations of dot_q4_1 on the same values, each weight block unpacked once for all
// tokens, without two half conversions per block, token and weight row; kN as a template
// argument keeps the accumulators in registers.
template <int kN>
void dot_q4_1_scaled_xn(const void* w, const void* x, int64_t x_stride, const float* x_scales,
                        int64_t scales_stride, float* out, int64_t out_stride, int64_t n) {
  const auto* wb = static_cast<const BlockQ4_1*>(w);  // [n / 32]
  const auto* rows = static_cast<const uint8_t*>(x);  // [kN, x_stride]
  __m256 acc[kN];
  float sum_min[kN];
  for (int t = 0; t < kN; ++t) acc[t] = _mm256_setzero_ps(), sum_min[t] = 0.0f;
  for (int64_t ib = 0; ib < n / kQK4_1; ++ib) {
    const __m256i wq = unpack_nibbles(wb[ib].qs);
    const __m256 dw = _mm256_set1_ps(half_to_float(wb[ib].d));
    const float mw = half_to_float(wb[ib].m);
    for (int t = 0; t < kN; ++t) {
      const auto* xb = reinterpret_cast<const BlockQ8_1*>(rows + t * x_stride) + ib;
      const float* scale = x_scales + t * scales_stride + 2 * ib;  // d, s
      sum_min[t] += mw * scale[1];
      const __m256 d = _mm256_mul_ps(dw, _mm256_broadcast_ss(scale));
      acc[t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(madd_u8_s8(wq, loadu256(xb->qs))), acc[t]);
    }
  }
  for (int t = 0; t < kN; ++t) out[t * out_stride] = hsum_ps(acc[t]) + sum_min[t];
}

void dot_q4_1_scaled(const void* w, const void* x, int64_t x_stride, const float* x_scales,
                     int64_t scales_stride, int64_t n_x, float* out, int64_t out_stride,
                     int64_t n) {
  with_row_count(n_x, [&](auto rows) {
    dot_q4_1_scaled_xn<rows.value>(w, x, x_stride, x_scales, scales_stride, out, out_stride, n);
  });
}

// The scaled kernels of the types read against Q8_0 activations: per block, the signed weight
// bytes from `weights(ib)` dotted with each token's bytes, scaled by dw * dx — the operations of
// their single kernels (dot_q8_0, dot_q4_0, dot_q5_0), on float activation scales.
template <int kN, typename WeightBytes, typename WeightScale>
void scaled_against_q8_0(const void* x, int64_t x_stride, const float* x_scales,
                         int64_t scales_stride, float* out, int64_t out_stride, int64_t n_blocks,
                         WeightBytes weights, WeightScale weight_scale) {
  const auto* rows = static_cast<const uint8_t*>(x);  // [kN, x_stride]
  __m256 acc[kN];
  for (int t = 0; t < kN; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t ib = 0; ib < n_blocks; ++ib) {
    const __m256i wq = weights(ib);
    const float dw = weight_scale(ib);
    for (int t = 0; t < kN; ++t) {
      const auto* xb = reinterpret_cast<const BlockQ8_0*>(rows + t * x_stride) + ib;
      const __m256 d = _mm256_set1_ps(dw * x_scales[t * scales_stride + 2 * ib]);
      acc[t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(madd_s8_s8(wq, loadu256(xb->qs))), acc[t]);
    }
  }
  for (int t = 0; t < kN; ++t) out[t * out_stride] = hsum_ps(acc[t]);
}

template <typename WeightBytes, typename WeightScale>
void scaled_against_q8_0_any(const void* x, int64_t x_stride, const float* x_scales,
                             int64_t scales_stride, int64_t n_x, float* out, int64_t out_stride,
                             int64_t n_blocks, WeightBytes weights, WeightScale weight_scale) {
  with_row_count(n_x, [&](auto rows) {
    scaled_against_q8_0<rows.value>(x, x_stride, x_scales, scales_stride, out, out_stride, n_blocks,
                                    weights, weight_scale);
  });
}

void dot_q8_0_scaled(const void* w, const void* x, int64_t x_stride, const float* x_scales,
                     int64_t scales_stride, int64_t n_x, float* out, int64_t out_stride,
                     int64_t n) {
  const auto* wb = static_cast<const BlockQ8_0*>(w);  // [n / 32]
  scaled_against_q8_0_any(
      x, x_stride, x_scales, scales_stride, n_x, out, out_stride, n / kQK8_0,
      [&](int64_t ib) { return loadu256(wb[ib].qs); },
      [&](int64_t ib) { return half_to_float(wb[ib].d); });
}

void dot_q4_0_scaled(const void* w, const void* x, int64_t x_stride, const float* x_scales,
                     int64_t scales_stride, int64_t n_x, float* out, int64_t out_stride,
                     int64_t n) {
  const auto* wb = static_cast<const BlockQ4_0*>(w);  // [n / 32]
  scaled_against_q8_0_any(
      x, x_stride, x_scales, scales_stride, n_x, out, out_stride, n / kQK4_0,
      [&](int64_t ib) { return q4_0_weights(wb[ib].qs); },
      [&](int64_t ib) { return half_to_float(wb[ib].d); });
}

float dot_q5_0(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ5_0*>(w);  // [n / 32]
  const auto* xb = static_cast<const BlockQ8_0*>(x);  // [n / 32]
  return accumulate_blocks_in_order(
      n / kQK5_0,
      [&](int64_t ib) {
        return madd_s8_s8(q5_0_weights(wb[ib].qs, wb[ib].qh), loadu256(xb[ib].qs));
      },
      [&](int64_t ib) { return half_to_float(wb[ib].d) * half_to_float(xb[ib].d); });
}

void dot_q5_0_scaled(const void* w, const void* x, int64_t x_stride, const float* x_scales,
                     int64_t scales_stride, int64_t n_x, float* out, int64_t out_stride,
                     int64_t n) {
  const auto* wb = static_cast<const BlockQ5_0*>(w);  // [n / 32]
  scaled_against_q8_0_any(
      x, x_stride, x_scales, scales_stride, n_x, out, out_stride, n / kQK5_0,
      [&](int64_t ib) { return q5_0_weights(wb[ib].qs, wb[ib].qh); },
      [&](int64_t ib) { return half_to_float(wb[ib].d); });
}

float dot_q5_1(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ5_1*>(w);  // [n / 32]
  const auto* xb = static_cast<const BlockQ8_1*>(x);  // [n / 32]
  const __m256i fifth = _mm256_set1_epi8(0x10);
  float sum_min = 0.0f;
  for (int64_t ib = 0; ib < n / kQK5_1; ++ib) {
    sum_min += half_to_float(wb[ib].m) * half_to_float(xb[ib].s);
  }
  return accumulate_blocks_in_order(
             n / kQK5_1,
             [&](int64_t ib) {
               const __m256i q = _mm256_or_si256(unpack_nibbles(wb[ib].qs),
                                                 _mm256_and_si256(expand_bits(wb[ib].qh), fifth));
               return madd_u8_s8(q, loadu256(xb[ib].qs));
             },
             [&](int64_t ib) { return half_to_float(wb[ib].d) * half_to_float(xb[ib].d); }) +
         sum_min;
}

// IQ4_NL and MXFP4: the nibble indexes a 16-entry int8 table, which one pshufb looks up.
__m256i table_in_both_lanes(const int8_t* values /*[16]*/) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)));
}

float dot_iq4_nl(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockIQ4_NL*>(w);  // [n / 32]
  const auto* xb = static_cast<const BlockQ8_0*>(x);    // [n / 32]
  const __m256i table = table_in_both_lanes(kValuesIq4nl);
  return accumulate_blocks(
      n / kQK4_NL,
      [&](int64_t ib) {
        const __m256i q = _mm256_shuffle_epi8(table, unpack_nibbles(wb[ib].qs));
        return madd_s8_s8(q, loadu256(xb[ib].qs));
      },
      [&](int64_t ib) { return half_to_float(wb[ib].d) * half_to_float(xb[ib].d); });
}

float dot_mxfp4(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockMXFP4*>(w);  // [n / 32]
  const auto* xb = static_cast<const BlockQ8_0*>(x);   // [n / 32]
  const __m256i table = table_in_both_lanes(kValuesMxfp4);
  return accumulate_blocks(
      n / kQK_MXFP4,
      [&](int64_t ib) {
        const __m256i q = _mm256_shuffle_epi8(table, unpack_nibbles(wb[ib].qs));
        return madd_s8_s8(q, loadu256(xb[ib].qs));
      },
      [&](int64_t ib) { return e8m0_half(wb[ib].e) * half_to_float(xb[ib].d); });
}

}  // namespace

void add_avx2_block32_kernels(VecDotTable& table) {
  table.kernels[int(QType::Q8_0)] = {dot_q8_0, CpuIsa::kAvx2, dot_q8_0_scaled};
  table.kernels[int(QType::Q4_0)] = {dot_q4_0, CpuIsa::kAvx2, dot_q4_0_scaled};
  table.kernels[int(QType::Q4_1)] = {dot_q4_1, CpuIsa::kAvx2, dot_q4_1_scaled};
  table.kernels[int(QType::Q5_0)] = {dot_q5_0, CpuIsa::kAvx2, dot_q5_0_scaled};
  table.kernels[int(QType::Q5_1)] = {dot_q5_1, CpuIsa::kAvx2};
  table.kernels[int(QType::IQ4_NL)] = {dot_iq4_nl, CpuIsa::kAvx2};
  table.kernels[int(QType::MXFP4)] = {dot_mxfp4, CpuIsa::kAvx2};
}

}  // namespace sluice::cpu
