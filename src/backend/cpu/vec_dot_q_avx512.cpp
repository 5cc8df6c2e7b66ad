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
      n / kQK4_0,
      [&](int64_t ib) { return _mm256_sub_epi8(unpack_nibbles(wb[ib].qs), _mm256_set1_epi8(8)); },
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
      n / kQK5_0,
      [&](int64_t ib) {
        const __m256i clear_high =
            _mm256_andnot_si256(expand_bits(wb[ib].qh), _mm256_set1_epi8(static_cast<char>(0xf0)));
        return _mm256_or_si256(unpack_nibbles(wb[ib].qs), clear_high);
      },
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

}  // namespace

void add_avx512_block32_kernels(VecDotTable& table) {
  table.kernels[int(QType::Q8_0)] = {dot_q8_0, CpuIsa::kAvx512};
  table.kernels[int(QType::Q4_0)] = {dot_q4_0, CpuIsa::kAvx512};
  table.kernels[int(QType::Q4_1)] = {dot_q4_1, CpuIsa::kAvx512};
  table.kernels[int(QType::Q5_0)] = {dot_q5_0, CpuIsa::kAvx512};
  table.kernels[int(QType::Q5_1)] = {dot_q5_1, CpuIsa::kAvx512};
  table.kernels[int(QType::IQ4_NL)] = {dot_iq4_nl, CpuIsa::kAvx512};
  table.kernels[int(QType::MXFP4)] = {dot_mxfp4, CpuIsa::kAvx512};
}

}  // namespace sluice::cpu
