// Row helpers for the F16 KV cache: float32 -> half conversion of a row and y += a * x for a
// half row x. One scalar version (bit-exact rounding through core/half.h) and one F16C/AVX2
// version chosen at run time; the F16C conversion rounds to nearest even as well, so both give
// the same halves. Knows nothing of attention or caches.
#pragma once

#include <cstdint>

namespace sluice::cpu {

using Fp32ToFp16RowFn = void (*)(const float* x, uint16_t* y, int64_t n);
using AxpyF16Fn = void (*)(float a, const uint16_t* x, float* y, int64_t n);

Fp32ToFp16RowFn fp32_to_fp16_row_kernel();
AxpyF16Fn axpy_f16_kernel();

// The AVX2 + F16C versions (f16_rows_avx2.cpp); call only when the CPU has AVX2.
void fp32_to_fp16_row_avx2(const float* x, uint16_t* y, int64_t n);
void axpy_f16_avx2(float a, const uint16_t* x, float* y, int64_t n);

}  // namespace sluice::cpu
