// AVX-512 dot products of the 32-element block types against Q8_0 / Q8_1: Q8_0, Q4_0, Q4_1,
// Q5_0, Q5_1, IQ4_NL and MXFP4. Two blocks fill one 512-bit register; each block's int8
// weights are built with the AVX2 unpacking, the products summed by VNNI dpbusd, and the two
// block scales applied as one vector. Differs from the reference only in float summation order.
#include "backend/cpu/avx2_util.h"
#include "backend/cpu/avx512_util.h"  // first: see its note on GCC 12
#include "backend/cpu/vec_dot_table.h"
#include "quant/blocks.h"
#include "quant/iq_tables.h"

namespace sluice::cpu {
namespace {

float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (uint32_t(e - 1) << 23);
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// `weights(ib)`: block ib's 32 int8 weights; `acts(ib)`: its 32 int8 activations;
// `scale(ib)`: the product of the two block scales. An odd last block pairs with zeros.
template <class Weights, class Acts, class Scale>
float accumulate_block_pairs(int64_t n_blocks, Weights weights, Acts acts, Scale scale) {
  __m512 acc = _mm512_setzero_ps();
  int64_t ib = 0;
  for (; ib + 1 < n_blocks; ib += 2) {
    const __m512i w = pair256(weights(ib), weights(ib + 1));
    const __m512i x = pair256(loadu256(acts(ib)), loadu256(acts(ib + 1)));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot4_s8_s8(w, x)),
                          two_scales(scale(ib), scale(ib + 1)), acc);
  }
  if (ib < n_blocks) {
    const __m512i w = _mm512_zextsi256_si512(weights(ib));
    const __m512i x = _mm512_zextsi256_si512(loadu256(acts(ib)));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot4_s8_s8(w, x)), two_scales(scale(ib), 0.0f), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

float dot_q8_0(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ8_0*>(w);  // [n / 32]
  const auto* xb = static_cast<const BlockQ8_0*>(x);  // [n / 32]
  return accumulate_block_pairs(
      n / kQK8_0, [&](int64_t ib) { return loadu256(wb[ib].qs); },
      [&](int64_t ib) { return xb[ib].qs; },
      [&](int64_t ib) { return half_to_float(wb[ib].d) * half_to_float(xb[ib].d); });
}

float dot_q4_0(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ4_0*>(w);  // [n / 32]
  const auto* xb = static_cast<const BlockQ8_0*>(x);  // [n / 32]
  return accumulate_block_pairs(
      n / kQK4_0, [&](int64_t ib) { return q4_0_weights(wb[ib].qs); },
      [&](int64_t ib) { return xb[ib].qs; },
      [&](int64_t ib) { return half_to_float(wb[ib].d) * half_to_float(xb[ib].d); });
}

float dot_q4_1(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ4_1*>(w);  // [n / 32]
  const auto* xb = static_cast<const BlockQ8_1*>(x);  // [n / 32]
  float sum_min = 0.0f;
  for (int64_t ib = 0; ib < n / kQK4_1; ++ib) {
    sum_min += half_to_float(wb[ib].m) * half_to_float(xb[ib].s);
  }
  return sum_min +
         accumulate_block_pairs(
             n / kQK4_1, [&](int64_t ib) { return unpack_nibbles(wb[ib].qs); },
             [&](int64_t ib) { return xb[ib].qs; },
             [&](int64_t ib) { return half_to_float(wb[ib].d) * half_to_float(xb[ib].d); });
}

float dot_q5_0(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ5_0*>(w);  // [n / 32]
  const auto* xb = static_cast<const BlockQ8_0*>(x);  // [n / 32]
  return accumulate_block_pairs(
      n / kQK5_0, [&](int64_t ib) { return q5_0_weights(wb[ib].qs, wb[ib].qh); },
      [&](int64_t ib) { return xb[ib].qs; },
      [&](int64_t ib) { return half_to_float(wb[ib].d) * half_to_float(xb[ib].d); });
}

float dot_q5_1(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ5_1*>(w);  // [n / 32]
  const auto* xb = static_cast<const BlockQ8_1*>(x);  // [n / 32]
  float sum_min = 0.0f;
  for (int64_t ib = 0; ib < n / kQK5_1; ++ib) {
    sum_min += half_to_float(wb[ib].m) * half_to_float(xb[ib].s);
  }
  return sum_min +
         accumulate_block_pairs(
             n / kQK5_1,
             [&](int64_t ib) {
               return _mm256_or_si256(
                   unpack_nibbles(wb[ib].qs),
                   _mm256_and_si256(expand_bits(wb[ib].qh), _mm256_set1_epi8(0x10)));
             },
             [&](int64_t ib) { return xb[ib].qs; },
             [&](int64_t ib) { return half_to_float(wb[ib].d) * half_to_float(xb[ib].d); });
}

__m256i table_in_both_lanes(const int8_t* values /*[16]*/) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)));
}

float dot_iq4_nl(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockIQ4_NL*>(w);  // [n / 32]
  const auto* xb = static_cast<const BlockQ8_0*>(x);    // [n / 32]
  const __m256i table = table_in_both_lanes(kValuesIq4nl);
  return accumulate_block_pairs(
      n / kQK4_NL,
      [&](int64_t ib) { return _mm256_shuffle_epi8(table, unpack_nibbles(wb[ib].qs)); },
      [&](int64_t ib) { return xb[ib].qs; },
      [&](int64_t ib) { return half_to_float(wb[ib].d) * half_to_float(xb[ib].d); });
}

float dot_mxfp4(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockMXFP4*>(w);  // [n / 32]
  const auto* xb = static_cast<const BlockQ8_0*>(x);   // [n / 32]
  const __m256i table = table_in_both_lanes(kValuesMxfp4);
  return accumulate_block_pairs(
      n / kQK_MXFP4,
      [&](int64_t ib) { return _mm256_shuffle_epi8(table, unpack_nibbles(wb[ib].qs)); },
      [&](int64_t ib) { return xb[ib].qs; },
      [&](int64_t ib) { return e8m0_half(wb[ib].e) * half_to_float(xb[ib].d); });
}

// The scaled kernels (VecDotScaledFn): up to kN activation rows against one weight row, each
// row's accumulate_block_pairs steps on the same values — every weight pair unpacked once for
// all rows, the activation block scales read as floats (half_to_float is exact, so the products
// dw * dx are the single kernels' own). Bit-identical to the single kernels.
// kUnsignedWeights: the weights are 0..15 (Q4_1), so dpbusd takes them as they are — the same
// exact integer sums as dot4_s8_s8 without its sign handling.
template <int kN, class ActBlock, bool kUnsignedWeights = false, class Weights, class WeightScale>
void scaled_block_pairs(const void* x, int64_t x_stride, const float* x_scales,
                        int64_t scales_stride, int64_t n_blocks, Weights weights,
                        WeightScale weight_scale, __m512 (&acc)[kN]) {
  const auto dot = [](__m512i w, __m512i xv) {
    if constexpr (kUnsignedWeights) {
      return _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, xv);
    } else {
      return dot4_s8_s8(w, xv);
    }
  };
  const auto* rows = static_cast<const uint8_t*>(x);  // [kN, x_stride]
  const auto acts = [&](int t, int64_t ib) {
    return loadu256(reinterpret_cast<const ActBlock*>(rows + t * x_stride)[ib].qs);
  };
  const auto dx = [&](int t, int64_t ib) { return x_scales[t * scales_stride + 2 * ib]; };
  for (int t = 0; t < kN; ++t) acc[t] = _mm512_setzero_ps();
  int64_t ib = 0;
  for (; ib + 1 < n_blocks; ib += 2) {
    const __m512i w = pair256(weights(ib), weights(ib + 1));
    const float dw0 = weight_scale(ib), dw1 = weight_scale(ib + 1);
    for (int t = 0; t < kN; ++t) {
      const __m512i xv = pair256(acts(t, ib), acts(t, ib + 1));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot(w, xv)),
                               two_scales(dw0 * dx(t, ib), dw1 * dx(t, ib + 1)), acc[t]);
    }
  }
  if (ib < n_blocks) {
    const __m512i w = _mm512_zextsi256_si512(weights(ib));
    const float dw0 = weight_scale(ib);
    for (int t = 0; t < kN; ++t) {
      const __m512i xv = _mm512_zextsi256_si512(acts(t, ib));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot(w, xv)), two_scales(dw0 * dx(t, ib), 0.0f),
                               acc[t]);
    }
  }
}

// The types read against Q8_0 activations (dot_q8_0, dot_q4_0, dot_q5_0).
template <int kN, class Weights, class WeightScale>
void scaled_against_q8_0(const void* x, int64_t x_stride, const float* x_scales,
                         int64_t scales_stride, float* out, int64_t out_stride, int64_t n_blocks,
                         Weights weights, WeightScale weight_scale) {
  __m512 acc[kN];
  scaled_block_pairs<kN, BlockQ8_0>(x, x_stride, x_scales, scales_stride, n_blocks, weights,
                                    weight_scale, acc);
  for (int t = 0; t < kN; ++t) out[t * out_stride] = _mm512_reduce_add_ps(acc[t]);
}

template <class Weights, class WeightScale>
void scaled_against_q8_0_any(const void* x, int64_t x_stride, const float* x_scales,
                             int64_t scales_stride, int64_t n_x, float* out, int64_t out_stride,
                             int64_t n_blocks, Weights weights, WeightScale weight_scale) {
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

void dot_q5_0_scaled(const void* w, const void* x, int64_t x_stride, const float* x_scales,
                     int64_t scales_stride, int64_t n_x, float* out, int64_t out_stride,
                     int64_t n) {
  const auto* wb = static_cast<const BlockQ5_0*>(w);  // [n / 32]
  scaled_against_q8_0_any(
      x, x_stride, x_scales, scales_stride, n_x, out, out_stride, n / kQK5_0,
      [&](int64_t ib) { return q5_0_weights(wb[ib].qs, wb[ib].qh); },
      [&](int64_t ib) { return half_to_float(wb[ib].d); });
}

// Q4_1 against Q8_1: dot_q4_1's minimum sum (m * s per block, in block order) plus the pairs.
template <int kN>
void dot_q4_1_scaled_xn(const void* w, const void* x, int64_t x_stride, const float* x_scales,
                        int64_t scales_stride, float* out, int64_t out_stride, int64_t n) {
  const auto* wb = static_cast<const BlockQ4_1*>(w);  // [n / 32]
  const int64_t n_blocks = n / kQK4_1;
  float sum_min[kN];
  for (int t = 0; t < kN; ++t) {
    sum_min[t] = 0.0f;
    for (int64_t ib = 0; ib < n_blocks; ++ib) {
      sum_min[t] += half_to_float(wb[ib].m) * x_scales[t * scales_stride + 2 * ib + 1];
    }
  }
  __m512 acc[kN];
  scaled_block_pairs<kN, BlockQ8_1, true>(
      x, x_stride, x_scales, scales_stride, n_blocks,
      [&](int64_t ib) { return unpack_nibbles(wb[ib].qs); },
      [&](int64_t ib) { return half_to_float(wb[ib].d); }, acc);
  for (int t = 0; t < kN; ++t) out[t * out_stride] = sum_min[t] + _mm512_reduce_add_ps(acc[t]);
}

void dot_q4_1_scaled(const void* w, const void* x, int64_t x_stride, const float* x_scales,
                     int64_t scales_stride, int64_t n_x, float* out, int64_t out_stride,
                     int64_t n) {
  with_row_count(n_x, [&](auto rows) {
    dot_q4_1_scaled_xn<rows.value>(w, x, x_stride, x_scales, scales_stride, out, out_stride, n);
  });
}

}  // namespace

void add_avx512_block32_kernels(VecDotTable& table) {
  table.kernels[int(QType::Q8_0)] = {dot_q8_0, CpuIsa::kAvx512, dot_q8_0_scaled};
  table.kernels[int(QType::Q4_0)] = {dot_q4_0, CpuIsa::kAvx512, dot_q4_0_scaled};
  table.kernels[int(QType::Q4_1)] = {dot_q4_1, CpuIsa::kAvx512, dot_q4_1_scaled};
  table.kernels[int(QType::Q5_0)] = {dot_q5_0, CpuIsa::kAvx512, dot_q5_0_scaled};
  table.kernels[int(QType::Q5_1)] = {dot_q5_1, CpuIsa::kAvx512};
  table.kernels[int(QType::IQ4_NL)] = {dot_iq4_nl, CpuIsa::kAvx512};
  table.kernels[int(QType::MXFP4)] = {dot_mxfp4, CpuIsa::kAvx512};
  table.kernels[int(QType::Q8_0)] = {dot_q8_0, CpuIsa::kAvx512, dot_q8_0_scaled};
  table.kernels[int(QType::Q4_0)] = {dot_q4_0, CpuIsa::kAvx512, dot_q4_0_scaled};
  table.kernels[int(QType::Q4_1)] = {dot_q4_1, CpuIsa::kAvx512, dot_q4_1_scaled};
  table.kernels[int(QType::Q5_0)] = {dot_q5_0, CpuIsa::kAvx512, dot_q5_0_scaled};
}

}  // namespace sluice::cpu
