// The per-type row kernels behind dequantizer_of(), grouped by the file that defines them.
// Internal to quant/: other rooms call dequantize_row() or dequantizer_of(). Each kernel takes
// n_elements that is a multiple of its block size and does no validation of its own.
#pragma once

#include <cstdint>

namespace sluice::dequant {

// dequantize.cpp: plain element types.
void row_f32(const void* src, float* dst, int64_t n);
void row_f16(const void* src, float* dst, int64_t n);
void row_bf16(const void* src, float* dst, int64_t n);
void row_f64(const void* src, float* dst, int64_t n);
void row_i8(const void* src, float* dst, int64_t n);
void row_i16(const void* src, float* dst, int64_t n);
void row_i32(const void* src, float* dst, int64_t n);
void row_i64(const void* src, float* dst, int64_t n);
void row_u8(const void* src, float* dst, int64_t n);
void row_bool(const void* src, float* dst, int64_t n);
void row_f8_e4m3(const void* src, float* dst, int64_t n);
void row_f8_e5m2(const void* src, float* dst, int64_t n);

// dequantize_legacy.cpp: the 32-element block types, the 8-bit activation formats, NVFP4, Q1_0.
void row_q4_0(const void* src, float* dst, int64_t n);
void row_q4_1(const void* src, float* dst, int64_t n);
void row_q5_0(const void* src, float* dst, int64_t n);
void row_q5_1(const void* src, float* dst, int64_t n);
void row_q8_0(const void* src, float* dst, int64_t n);
void row_q8_1(const void* src, float* dst, int64_t n);
void row_q8_k(const void* src, float* dst, int64_t n);
void row_iq4_nl(const void* src, float* dst, int64_t n);
void row_mxfp4(const void* src, float* dst, int64_t n);
void row_nvfp4(const void* src, float* dst, int64_t n);
void row_q1_0(const void* src, float* dst, int64_t n);

// dequantize_k.cpp: K-quants and the ternary types.
void row_q2_k(const void* src, float* dst, int64_t n);
void row_q3_k(const void* src, float* dst, int64_t n);
void row_q4_k(const void* src, float* dst, int64_t n);
void row_q5_k(const void* src, float* dst, int64_t n);
void row_q6_k(const void* src, float* dst, int64_t n);
void row_tq1_0(const void* src, float* dst, int64_t n);
void row_tq2_0(const void* src, float* dst, int64_t n);

// dequantize_iq.cpp: the grid-based IQ types and IQ4_XS.
void row_iq2_xxs(const void* src, float* dst, int64_t n);
void row_iq2_xs(const void* src, float* dst, int64_t n);
void row_iq2_s(const void* src, float* dst, int64_t n);
void row_iq3_xxs(const void* src, float* dst, int64_t n);
void row_iq3_s(const void* src, float* dst, int64_t n);
void row_iq1_s(const void* src, float* dst, int64_t n);
void row_iq1_m(const void* src, float* dst, int64_t n);
void row_iq4_xs(const void* src, float* dst, int64_t n);

}  // namespace sluice::dequant
