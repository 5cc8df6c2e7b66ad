// Scalar reference quantization of float32 rows into block formats, byte for byte what
// gguf-py's numpy quantizers (and ggml's quantize_row_*_ref) write. Used to make model files
// and activation blocks; the backend's fast quantizers are tested against it.
#pragma once

#include <cstdint>

#include "quant/qtype.h"

namespace sluice {

// A row kernel: `n_elements` floats (a multiple of the block size) into blocks at `dst`.
using QuantizeFn = void (*)(const float* src, void* dst, int64_t n_elements);

// The row quantizer of `type`, or nullptr when the type cannot be quantized (yet).
QuantizeFn quantizer_of(QType type);
inline bool quantize_supported(QType type) {
  return quantizer_of(type) != nullptr;
}

// Quantizes a row into row_bytes(type, n_elements) bytes at `dst`. Fails for an unsupported
// type or an n_elements that is not a whole number of blocks.
void quantize_row(QType type, const float* src, void* dst, int64_t n_elements);

// The individual quantizers (declared for direct use by tests and the CPU backend).
void quantize_row_f32(const float* src, void* dst, int64_t n);
void quantize_row_f16(const float* src, void* dst, int64_t n);
void quantize_row_bf16(const float* src, void* dst, int64_t n);
void quantize_row_q4_0(const float* src, void* dst, int64_t n);
void quantize_row_q4_1(const float* src, void* dst, int64_t n);
void quantize_row_q5_0(const float* src, void* dst, int64_t n);
void quantize_row_q5_1(const float* src, void* dst, int64_t n);
void quantize_row_q8_0(const float* src, void* dst, int64_t n);
void quantize_row_mxfp4(const float* src, void* dst, int64_t n);
void quantize_row_tq1_0(const float* src, void* dst, int64_t n);
void quantize_row_tq2_0(const float* src, void* dst, int64_t n);
// Activation formats for dot products (not written to files): ggml's reference semantics.
void quantize_row_q8_1(const float* src, void* dst, int64_t n);
void quantize_row_q8_k(const float* src, void* dst, int64_t n);

}  // namespace sluice
