// Quantized weight × float activation products and row lookups on the GPU, for every weight type
// the supported models use. Plain C++ (no CUDA headers): the CUDA backend and the device tests
// call it; the kernels live in the .cu files of this folder.
//
// All pointers are device pointers; `stream` is a cudaStream_t passed as void* (nullptr: the
// default stream). Calls only enqueue work; errors of the launch are reported by the return
// value (false with *error set), never by aborting.
#pragma once

#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "backend/cuda/cpu_order.h"
#include "quant/qtype.h"

namespace sluice::cuda {

// True when matmul/get_rows have kernels for weights of `type`.
bool quant_matmul_supported(QType type);

// y[t, r] = sum_c W[r, c] * x[t, c] for t < n_tokens, r < n_rows.
// w: n_rows rows of row_bytes(type, n_cols) bytes (GGUF layout, as in the file);
// x: [n_tokens, n_cols] float; y: [n_tokens, n_rows] float. n_cols is a whole number of blocks.
// Chunks of up to kCpuRoundingMaxTokens tokens (or any length with cpu_rounding) run as decode
// launches of at most 8 tokens: the CPU backend's arithmetic; longer ones on f16 operands
// (cuBLAS when loaded, else the tensor-core tiles).
constexpr int64_t kCpuRoundingMaxTokens = 32;
// cpu_order: the decode products' float order (quant_kernel_set.h).
bool matmul(QType type, const void* w, int64_t n_rows, int64_t n_cols, const float* x, float* y,
            int64_t n_tokens, void* stream, std::string* error, bool cpu_rounding = false,
            CpuOrder cpu_order = CpuOrder::kNone);

// Decode (n_tokens <= 8) with activations quantized once and shared by several products
// (q/k/v, gate/up read the same input): matmul quantizes its activations on every call, a
// second kernel launch that costs about as much as a small matrix's product.
// quantize_activations writes x in the activation format of `weight_type` (quant/dot_reference.h,
// activation_type_for: Q8_K for every K and IQ type, Q8_0 or Q8_1 for the 32-element types)
// into `out`, a 16-byte aligned device buffer of quantized_activation_bytes(...) bytes;
// matmul_quantized then launches only the product. The output equals matmul's bit for bit.
// Activations quantized for one weight type serve every type with the same activation format
// and the same n_cols / n_tokens. False with a one-line message for the float types, more than
// 8 tokens, or bad shapes.
bool quantized_decode_supported(QType weight_type);
int64_t quantized_activation_bytes(QType weight_type, int64_t n_cols, int64_t n_tokens);
bool quantize_activations(QType weight_type, const float* x, int64_t n_cols, int64_t n_tokens,
                          void* out, void* stream, std::string* error);
// gate = act(gate) * up (the glu op: gate keeps the values) and those values quantized into
// `out` as quantize_activations(weight_type, gate, …) would: one launch instead of two for the
// down product's input. gelu_f16_table: the device table of the f16 GELU (kGeluTanhF16 only).
bool glu_quantize_activations(QType weight_type, GluActivation act, float* gate, const float* up,
                              int64_t n_cols, int64_t n_tokens, const uint16_t* gelu_f16_table,
                              void* out, void* stream, std::string* error);
bool matmul_quantized(QType weight_type, const void* w, int64_t n_rows, int64_t n_cols,
                      const void* xq, float* y, int64_t n_tokens, void* stream, std::string* error,
                      CpuOrder cpu_order = CpuOrder::kNone);

// ys[i] = ws[i] xq for i < n: the products of matmul_quantized for n matrices of one weight type
// and n_cols (n_rows[i] rows each), in one kernel launch per 4 matrices instead of one each
// (decode spends a launch per small product). Each output equals matmul's bit for bit. The same
// checks as matmul_quantized, for every matrix, before any launch.
bool matmul_quantized_many(QType weight_type, const void* const* ws, const int64_t* n_rows,
                           size_t n, int64_t n_cols, const void* xq, float* const* ys,
                           int64_t n_tokens, void* stream, std::string* error,
                           CpuOrder cpu_order = CpuOrder::kNone);

// out[i, :] = row ids[i] of the table, dequantized to float. ids: device int32 [n];
// out: [n, n_cols].
bool get_rows(QType type, const void* table, int64_t n_cols, const int32_t* ids, int64_t n,
              float* out, void* stream, std::string* error);

}  // namespace sluice::cuda
