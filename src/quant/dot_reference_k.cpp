// Reference dot products of the K-quants (256-element super-blocks) against Q8_K activations.
// Sub-block scales multiply integer sums, so a whole super-block reduces to one integer that
// the float scales (weight d times activation d) multiply once. Minimum terms use Q8_K's
// per-16 sums (bsums), as ggml does, instead of re-summing the activations.
#include <cstring>

#include "core/half.h"
#include "quant/blocks.h"
#include "quant/dot_reference_kernels.h"

namespace sluice::dot {

// Q2_K: byte l of a 32-byte group holds elements l, l+32, l+64, l+96 of a 128 half-block at
// shifts 0, 2, 4, 6; each 16 elements have a 4-bit scale (low nibble) and min (high nibble).
float q2_k_q8_k(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ2_K*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);  // [n / 256]
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int sum_mins = 0;
    for (int j = 0; j < 16; ++j) sum_mins += xb[i].bsums[j] * (wb[i].scales[j] >> 4);
    int sumi = 0;
    for (int half = 0; half < 2; ++half) {
      const uint8_t* q2 = wb[i].qs + 32 * half;
      for (int shift = 0; shift < 4; ++shift) {
        for (int part = 0; part < 2; ++part) {
          const int sub = 8 * half + 2 * shift + part;  // 16-element sub-block index
          const int8_t* q8 = xb[i].qs + 16 * sub;
          int sub_sum = 0;
          for (int l = 0; l < 16; ++l) sub_sum += q8[l] * ((q2[16 * part + l] >> (2 * shift)) & 3);
          sumi += (wb[i].scales[sub] & 0xf) * sub_sum;
        }
      }
    }
    const float dall = xb[i].d * fp16_to_fp32(wb[i].d);
    const float dmin = xb[i].d * fp16_to_fp32(wb[i].dmin);
    sum += dall * float(sumi) - dmin * float(sum_mins);
  }
  return sum;
}

// Q3_K: low 2 bits laid out as Q2_K's; bit (element / 32) of hmask[element % 32] is the high
// bit, and a clear high bit means the value is 4 lower (values span -4..3).
float q3_k_q8_k(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ3_K*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);  // [n / 256]
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int8_t scales[16];
    q3_k_scales(wb[i].scales, scales);
    int sumi = 0;
    for (int e = 0; e < kQK_K; e += 16) {
      int sub_sum = 0;
      for (int k = e; k < e + 16; ++k) {
        const int group = k / 32;  // 0..7: which (128-half, shift) pair
        const int l = k % 32;
        const int low = (wb[i].qs[32 * (group / 4) + l] >> (2 * (group % 4))) & 3;
        const int value = low - ((wb[i].hmask[l] >> group) & 1 ? 0 : 4);
        sub_sum += value * xb[i].qs[k];
      }
      sumi += scales[e / 16] * sub_sum;
    }
    sum += fp16_to_fp32(wb[i].d) * xb[i].d * float(sumi);
  }
  return sum;
}

// Q4_K: 64-element chunks, 32 bytes each: low nibbles are the first 32, high nibbles the next.
float q4_k_q8_k(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ4_K*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);  // [n / 256]
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int sumi = 0;
    int sum_mins = 0;
    for (int sub = 0; sub < 8; ++sub) {
      uint8_t scale, min;
      k4_scale_min(sub, wb[i].scales, &scale, &min);
      const uint8_t* q4 = wb[i].qs + 32 * (sub / 2);
      const int shift = 4 * (sub % 2);
      const int8_t* q8 = xb[i].qs + 32 * sub;
      int sub_sum = 0;
      for (int l = 0; l < 32; ++l) sub_sum += ((q4[l] >> shift) & 0xf) * q8[l];
      sumi += scale * sub_sum;
      sum_mins += min * (xb[i].bsums[2 * sub] + xb[i].bsums[2 * sub + 1]);
    }
    const float d = fp16_to_fp32(wb[i].d) * xb[i].d;
    const float dmin = fp16_to_fp32(wb[i].dmin) * xb[i].d;
    sum += d * float(sumi) - dmin * float(sum_mins);
  }
  return sum;
}

// Q5_K: Q4_K plus a fifth bit: bit `sub` of qh[l] belongs to element 32 * sub + l.
float q5_k_q8_k(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ5_K*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);  // [n / 256]
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int sumi = 0;
    int sum_mins = 0;
    for (int sub = 0; sub < 8; ++sub) {
      uint8_t scale, min;
      k4_scale_min(sub, wb[i].scales, &scale, &min);
      const uint8_t* q4 = wb[i].qs + 32 * (sub / 2);
      const int shift = 4 * (sub % 2);
      const int8_t* q8 = xb[i].qs + 32 * sub;
      int sub_sum = 0;
      for (int l = 0; l < 32; ++l) {
        const int value = ((q4[l] >> shift) & 0xf) | (((wb[i].qh[l] >> sub) & 1) << 4);
        sub_sum += value * q8[l];
      }
      sumi += scale * sub_sum;
      sum_mins += min * (xb[i].bsums[2 * sub] + xb[i].bsums[2 * sub + 1]);
    }
    const float d = fp16_to_fp32(wb[i].d) * xb[i].d;
    const float dmin = fp16_to_fp32(wb[i].dmin) * xb[i].d;
    sum += d * float(sumi) - dmin * float(sum_mins);
  }
  return sum;
}

// Q6_K: per 128 half-block, ql bytes 0..63 give low nibbles (elements l, l+32 from the low
// nibble of bytes l, l+32; l+64, l+96 from their high nibble), qh byte l the 2-bit tops.
float q6_k_q8_k(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ6_K*>(w);  // [n / 256]
  const auto* xb = static_cast<const BlockQ8_K*>(x);  // [n / 256]
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int8_t values[kQK_K];
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = wb[i].ql + 64 * half;
      const uint8_t* qh = wb[i].qh + 32 * half;
      int8_t* out = values + 128 * half;
      for (int l = 0; l < 32; ++l) {
        out[l] = int8_t(((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32);
        out[l + 32] = int8_t(((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32);
        out[l + 64] = int8_t(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
        out[l + 96] = int8_t(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
      }
    }
    int sumi = 0;
    for (int sub = 0; sub < 16; ++sub) {
      int sub_sum = 0;
      for (int l = 16 * sub; l < 16 * sub + 16; ++l) sub_sum += values[l] * xb[i].qs[l];
      sumi += wb[i].scales[sub] * sub_sum;
    }
    sum += fp16_to_fp32(wb[i].d) * xb[i].d * float(sumi);
  }
  return sum;
}

}  // namespace sluice::dot
