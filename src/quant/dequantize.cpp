// dequantize_row() dispatch, the plain element types (floats, integers, FP8) and the FP8
// block-scaled checkpoint layout. The block formats' kernels live in dequantize_legacy.cpp,
// dequantize_k.cpp and dequantize_iq.cpp; this file only knows their names.
#include "quant/dequantize.h"

#include <cstring>

#include "core/error.h"
#include "core/half.h"
#include "quant/dequantize_kernels.h"
#include "quant/float_formats.h"

namespace sluice {
namespace dequant {
namespace {

// Element-wise conversion through memcpy, so rows need no alignment beyond a byte.
template <class T>
void convert_elements(const void* src, float* dst, int64_t n) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    T value;
    std::memcpy(&value, bytes + i * int64_t(sizeof(T)), sizeof(T));
    dst[i] = static_cast<float>(value);  // integers and doubles round to nearest, as numpy
  }
}

}  // namespace

void row_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, size_t(n) * sizeof(float));
}

void row_f16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
}

void row_bf16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(h[i]);
}

void row_f64(const void* src, float* dst, int64_t n) {
  convert_elements<double>(src, dst, n);
}
void row_i8(const void* src, float* dst, int64_t n) {
  convert_elements<int8_t>(src, dst, n);
}
void row_i16(const void* src, float* dst, int64_t n) {
  convert_elements<int16_t>(src, dst, n);
}
void row_i32(const void* src, float* dst, int64_t n) {
  convert_elements<int32_t>(src, dst, n);
}
void row_i64(const void* src, float* dst, int64_t n) {
  convert_elements<int64_t>(src, dst, n);
}
void row_u8(const void* src, float* dst, int64_t n) {
  convert_elements<uint8_t>(src, dst, n);
}

void row_bool(const void* src, float* dst, int64_t n) {
  // Any nonzero byte is true, as a C++ bool or numpy's bool cast would read it.
  const auto* b = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = b[i] != 0 ? 1.0f : 0.0f;
}

void row_f8_e4m3(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = fp8_e4m3_to_fp32(b[i]);
}

void row_f8_e5m2(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = fp8_e5m2_to_fp32(b[i]);
}

}  // namespace dequant

DequantizeFn dequantizer_of(QType type) {
  using namespace dequant;
  switch (type) {
    case QType::F32:
      return row_f32;
    case QType::F16:
      return row_f16;
    case QType::BF16:
      return row_bf16;
    case QType::F64:
      return row_f64;
    case QType::I8:
      return row_i8;
    case QType::I16:
      return row_i16;
    case QType::I32:
      return row_i32;
    case QType::I64:
      return row_i64;
    case QType::U8:
      return row_u8;
    case QType::BOOL:
      return row_bool;
    case QType::F8_E4M3:
      return row_f8_e4m3;
    case QType::F8_E5M2:
      return row_f8_e5m2;
    case QType::Q4_0:
      return row_q4_0;
    case QType::Q4_1:
      return row_q4_1;
    case QType::Q5_0:
      return row_q5_0;
    case QType::Q5_1:
      return row_q5_1;
    case QType::Q8_0:
      return row_q8_0;
    case QType::Q8_1:
      return row_q8_1;
    case QType::Q8_K:
      return row_q8_k;
    case QType::IQ4_NL:
      return row_iq4_nl;
    case QType::MXFP4:
      return row_mxfp4;
    case QType::NVFP4:
      return row_nvfp4;
    case QType::Q1_0:
      return row_q1_0;
    case QType::Q2_K:
      return row_q2_k;
    case QType::Q3_K:
      return row_q3_k;
    case QType::Q4_K:
      return row_q4_k;
    case QType::Q5_K:
      return row_q5_k;
    case QType::Q6_K:
      return row_q6_k;
    case QType::TQ1_0:
      return row_tq1_0;
    case QType::TQ2_0:
      return row_tq2_0;
    case QType::IQ2_XXS:
      return row_iq2_xxs;
    case QType::IQ2_XS:
      return row_iq2_xs;
    case QType::IQ2_S:
      return row_iq2_s;
    case QType::IQ3_XXS:
      return row_iq3_xxs;
    case QType::IQ3_S:
      return row_iq3_s;
    case QType::IQ1_S:
      return row_iq1_s;
    case QType::IQ1_M:
      return row_iq1_m;
    case QType::IQ4_XS:
      return row_iq4_xs;
  }
  fail("dequantize: unknown type id ", static_cast<uint32_t>(type));
}

void dequantize_row(QType type, const void* src, float* dst, int64_t n_elements) {
  const auto& traits = traits_of(type);
  if (n_elements < 0 || n_elements % traits.block_size != 0) {
    fail("dequantize: ", n_elements, " elements is not a whole number of ", traits.name,
         " blocks of ", traits.block_size);
  }
  dequantizer_of(type)(src, dst, n_elements);
}

void dequantize_fp8_block_scaled(const uint8_t* weight, const float* scale_inv, float* dst,
                                 int64_t rows, int64_t cols, int64_t block_rows,
                                 int64_t block_cols) {
  if (rows < 0 || cols < 0 || block_rows <= 0 || block_cols <= 0) {
    fail("dequantize fp8: bad shape [", rows, ", ", cols, "] with blocks [", block_rows, ", ",
         block_cols, "]");
  }
  const int64_t scale_cols = (cols + block_cols - 1) / block_cols;
  for (int64_t r = 0; r < rows; ++r) {
    const float* scale_row = scale_inv + (r / block_rows) * scale_cols;
    const uint8_t* in = weight + r * cols;
    float* out = dst + r * cols;
    for (int64_t c = 0; c < cols; ++c) out[c] = fp8_e4m3_to_fp32(in[c]) * scale_row[c / block_cols];
  }
}

}  // namespace sluice
