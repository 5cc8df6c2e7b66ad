// The per-type reference dot kernels behind vec_dot_reference_of(), grouped by defining file.
// Internal to quant/: other rooms go through dot_reference.h. Each kernel takes n_elements that
// is a multiple of its block size and validates nothing itself.
#pragma once

#include <cstdint>

namespace sluice::dot {

// dot_reference.cpp: plain float types (accumulated in double, as ggml's ggml_float) and the
// 32-element block types.
float f32_f32(const void* w, const void* x, int64_t n);
float f16_f16(const void* w, const void* x, int64_t n);
float bf16_bf16(const void* w, const void* x, int64_t n);
float q4_0_q8_0(const void* w, const void* x, int64_t n);
float q4_1_q8_1(const void* w, const void* x, int64_t n);
float q5_0_q8_0(const void* w, const void* x, int64_t n);
float q5_1_q8_1(const void* w, const void* x, int64_t n);
float q8_0_q8_0(const void* w, const void* x, int64_t n);
float iq4_nl_q8_0(const void* w, const void* x, int64_t n);
float mxfp4_q8_0(const void* w, const void* x, int64_t n);

// dot_reference_k.cpp: K-quants against Q8_K.
float q2_k_q8_k(const void* w, const void* x, int64_t n);
float q3_k_q8_k(const void* w, const void* x, int64_t n);
float q4_k_q8_k(const void* w, const void* x, int64_t n);
float q5_k_q8_k(const void* w, const void* x, int64_t n);
float q6_k_q8_k(const void* w, const void* x, int64_t n);

// dot_reference_iq.cpp: IQ types against Q8_K.
float iq2_xxs_q8_k(const void* w, const void* x, int64_t n);
float iq2_xs_q8_k(const void* w, const void* x, int64_t n);
float iq2_s_q8_k(const void* w, const void* x, int64_t n);
float iq3_xxs_q8_k(const void* w, const void* x, int64_t n);
float iq3_s_q8_k(const void* w, const void* x, int64_t n);
float iq1_s_q8_k(const void* w, const void* x, int64_t n);
float iq1_m_q8_k(const void* w, const void* x, int64_t n);
float iq4_xs_q8_k(const void* w, const void* x, int64_t n);

// Unpacks the 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block: the first four
// sit in the low 6 bits of bytes 0..7, the last four are split across nibbles and top bits.
inline void k4_scale_min(int j, const uint8_t* scales, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = scales[j] & 63;
    *min = scales[j + 4] & 63;
  } else {
    *scale = uint8_t((scales[j + 4] & 0xf) | ((scales[j - 4] >> 6) << 4));
    *min = uint8_t((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

// Unpacks the sixteen 6-bit scales of a Q3_K block (stored biased by 32) into signed values.
inline void q3_k_scales(const uint8_t* packed /*[12]*/, int8_t* scales /*[16]*/) {
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? (packed[j] & 0xf) : (packed[j - 8] >> 4);
    const int high = (packed[8 + (j % 4)] >> (2 * (j / 4))) & 3;
    scales[j] = int8_t((low | (high << 4)) - 32);
  }
}

}  // namespace sluice::dot
