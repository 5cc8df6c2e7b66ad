// quant_matmul.h: checks shapes and alignment on the host (one-line errors, never a crash) and
// hands the call to the kernel set of the weight's type (quant_kernels_*.cu).
#include "backend/cuda/quant_matmul.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "backend/cpu/tiled_kquant.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/quant_kernel_set.h"
#include "core/error.h"
#include "quant/dot_reference.h"

namespace sluice::cuda {
namespace {

constexpr int64_t kDecodeTokens = 8;  // the matvec kernels' widest launch

const quant::KernelSet* kernel_set(QType type) {
  if (const quant::KernelSet* set = quant::kernel_set_float(type)) return set;
  if (const quant::KernelSet* set = quant::kernel_set_legacy(type)) return set;
  if (const quant::KernelSet* set = quant::kernel_set_k(type)) return set;
  return quant::kernel_set_iq(type);
}

// Whether the CPU multiplies an op of n_tokens K-quant rows with its tiled matmul, whose order
// --cpu-rounding then follows (backend/cpu/tiled_kquant.h).
bool cpu_tiled(CpuOrder order, int64_t n_tokens) {
  return order != CpuOrder::kNone && n_tokens >= cpu::kTiledMinTokens;
}

bool fail(std::string* error, const std::string& message) {
  if (error) *error = message;
  return false;
}

bool aligned(const void* p, int64_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % uintptr_t(alignment) == 0;
}

// The checks matmul and get_rows share: a known type, whole blocks (whole groups of 8 for the
// plain types), an aligned weight pointer. Sets *row_bytes.
const quant::KernelSet* checked_set(const char* op, QType type, const void* w, int64_t n_cols,
                                    int64_t* row_bytes_out, std::string* error) {
  const std::string where = std::string("cuda ") + op + " (" + std::string(qtype_name(type)) + ")";
  const quant::KernelSet* set = kernel_set(type);
  if (!set) return fail(error, where + ": weight type not supported on CUDA"), nullptr;
  if (n_cols <= 0 || n_cols % set->elems_per_block != 0 || n_cols / 8 > INT32_MAX) {
    fail(error, where + ": n_cols " + std::to_string(n_cols) + " is not a positive multiple of " +
                    std::to_string(set->elems_per_block));
    return nullptr;
  }
  if (!w || !aligned(w, set->weight_align)) {
    fail(error, where + ": weights not aligned to " + std::to_string(set->weight_align) + " bytes");
    return nullptr;
  }
  *row_bytes_out = int64_t(*row_bytes(type, uint64_t(n_cols)));
  return set;
}

#if SLUICE_HAVE_CUBLAS
// A stream being captured into a graph takes the tile kernels: the cuBLAS path may allocate.
bool capturing(void* stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &capture) != cudaSuccess ||
         capture != cudaStreamCaptureStatusNone;
}
#endif

}  // namespace

bool quant_matmul_supported(QType type) {
  return kernel_set(type) != nullptr;
}

bool matmul(QType type, const void* w, int64_t n_rows, int64_t n_cols, const float* x, float* y,
            int64_t n_tokens, void* stream, std::string* error, bool cpu_rounding,
            CpuOrder cpu_order) {
  int64_t row_bytes = 0;
  const quant::KernelSet* set = checked_set("matmul", type, w, n_cols, &row_bytes, error);
  if (!set) return false;
  if (n_rows <= 0 || n_tokens < 0) {
    return fail(error, "cuda matmul: bad shape: " + std::to_string(n_rows) + " rows, " +
                           std::to_string(n_tokens) + " tokens");
  }
  if (n_tokens == 0) return true;
  if (!x || !y || !aligned(x, 16) || !aligned(y, 4)) {
    return fail(error, "cuda matmul: activations must be 16-byte aligned, outputs 4-byte aligned");
  }
  quant::MatmulArgs args{w, n_rows, n_cols, row_bytes, x, y, n_tokens, stream};
  args.cpu_order = cpu_order;
  args.cpu_tiled = cpu_tiled(cpu_order, n_tokens);
  if (n_tokens > kDecodeTokens && (n_tokens <= kCpuRoundingMaxTokens || cpu_rounding)) {
    // A short chunk as decode steps of up to 8 tokens: the CPU's arithmetic (int8 activations
    // for the quantized types, float for the float ones) instead of the tiles' f16 operands.
    // Recurrent layers (the gated delta rule) carry a prefill's rounding into every later state,
    // and the f16 tiles moved their logits 3-10x past the CPU's distance to llama.cpp on the
    // tiny models; a chunk this short costs at most 4 weight reads.
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kDecodeTokens) {
      quant::MatmulArgs part = args;
      part.x = x + t0 * n_cols;
      part.y = y + t0 * n_rows;
      part.n_tokens = std::min(kDecodeTokens, n_tokens - t0);
      if (!set->matmul(part, error)) return false;
    }
    return true;
  }
#if SLUICE_HAVE_CUBLAS
  if (n_tokens >= quant::kCublasMinTokens && quant::cublas_loaded() && !capturing(stream)) {
    return quant::matmul_by_cublas(*set, args, error);
  }
#endif
  return set->matmul(args, error);
}

bool quantized_decode_supported(QType weight_type) {
  const quant::KernelSet* set = kernel_set(weight_type);
  return set && set->quantize;
}

int64_t quantized_activation_bytes(QType weight_type, int64_t n_cols, int64_t n_tokens) {
  const quant::KernelSet* set = kernel_set(weight_type);
  if (!set || !set->quantize || n_cols <= 0 || n_tokens <= 0) return 0;
  return quant::quantized_rows_bytes(n_tokens, n_cols, set->activation_block);
}

namespace {

// The checks quantize_activations and matmul_quantized share.
const quant::KernelSet* checked_quantized(const char* op, QType type, int64_t n_cols,
                                          int64_t n_tokens, const void* xq, std::string* error) {
  const std::string where = std::string("cuda ") + op + " (" + std::string(qtype_name(type)) + ")";
  const quant::KernelSet* set = kernel_set(type);
  if (!set || !set->quantize) {
    return fail(error, where + ": no quantized decode for this weight type"), nullptr;
  }
  if (n_cols <= 0 || n_cols % set->elems_per_block != 0 || n_cols % set->activation_block != 0) {
    fail(error, where + ": n_cols " + std::to_string(n_cols) + " is not a positive multiple of " +
                    std::to_string(set->elems_per_block));
    return nullptr;
  }
  if (n_tokens < 1 || n_tokens > 8) {
    fail(error, where + ": " + std::to_string(n_tokens) + " tokens (1 to 8 allowed)");
    return nullptr;
  }
  if (!xq || !aligned(xq, 16)) {
    return fail(error, where + ": quantized activations missing or not 16-byte aligned"), nullptr;
  }
  return set;
}

}  // namespace

bool quantize_activations(QType weight_type, const float* x, int64_t n_cols, int64_t n_tokens,
                          void* out, void* stream, std::string* error) {
  const quant::KernelSet* set =
      checked_quantized("quantize_activations", weight_type, n_cols, n_tokens, out, error);
  if (!set) return false;
  if (!x || !aligned(x, 16)) {
    return fail(error, "cuda quantize_activations: activations must be 16-byte aligned");
  }
  quant::MatmulArgs args{nullptr, 0, n_cols, 0, x, nullptr, n_tokens, stream};
  return set->quantize(args, out, error);
}

bool glu_quantize_activations(QType weight_type, GluActivation act, float* gate, const float* up,
                              int64_t n_cols, int64_t n_tokens, const uint16_t* gelu_f16_table,
                              void* out, void* stream, std::string* error) {
  const quant::KernelSet* set =
      checked_quantized("glu_quantize_activations", weight_type, n_cols, n_tokens, out, error);
  if (!set) return false;
  if (!gate || !up || !aligned(gate, 16) || !aligned(up, 16)) {
    return fail(error, "cuda glu_quantize_activations: gate and up must be 16-byte aligned");
  }
  try {
    launch_glu_quantize(act, gate, up, n_tokens, n_cols, gelu_f16_table, set->activation_block,
                        activation_type_for(weight_type) == QType::Q8_1, out,
                        static_cast<cudaStream_t>(stream));
  } catch (const Error& e) {
    return fail(error, e.what());
  }
  return true;
}

bool matmul_quantized(QType weight_type, const void* w, int64_t n_rows, int64_t n_cols,
                      const void* xq, float* y, int64_t n_tokens, void* stream, std::string* error,
                      CpuOrder cpu_order) {
  if (!checked_quantized("matmul_quantized", weight_type, n_cols, n_tokens, xq, error)) {
    return false;
  }
  int64_t row_bytes = 0;
  const quant::KernelSet* set = checked_set("matmul", weight_type, w, n_cols, &row_bytes, error);
  if (!set) return false;
  if (n_rows <= 0)
    return fail(error, "cuda matmul_quantized: bad shape: " + std::to_string(n_rows) + " rows");
  if (!y || !aligned(y, 4))
    return fail(error, "cuda matmul_quantized: outputs must be 4-byte aligned");
  quant::MatmulArgs args{w,
                         n_rows,
                         n_cols,
                         row_bytes,
                         nullptr,
                         y,
                         n_tokens,
                         stream,
                         xq,
                         cpu_order,
                         cpu_tiled(cpu_order, n_tokens)};
  return set->matmul(args, error);
}

bool matmul_quantized_many(QType weight_type, const void* const* ws, const int64_t* n_rows,
                           size_t n, int64_t n_cols, const void* xq, float* const* ys,
                           int64_t n_tokens, void* stream, std::string* error, CpuOrder cpu_order) {
  if (!checked_quantized("matmul_quantized_many", weight_type, n_cols, n_tokens, xq, error)) {
    return false;
  }
  if (n == 0) return true;
  if (!ws || !n_rows || !ys) return fail(error, "cuda matmul_quantized_many: missing lists");
  int64_t row_bytes = 0;
  const quant::KernelSet* set = nullptr;
  for (size_t i = 0; i < n; ++i) {
    set = checked_set("matmul_quantized_many", weight_type, ws[i], n_cols, &row_bytes, error);
    if (!set) return false;
    // The blocks of all the matrices share grid.x (< 2^31): at most 2^30 rows each.
    if (n_rows[i] <= 0 || n_rows[i] > (int64_t(1) << 30)) {
      return fail(error,
                  "cuda matmul_quantized_many: bad shape: " + std::to_string(n_rows[i]) + " rows");
    }
    if (!ys[i] || !aligned(ys[i], 4)) {
      return fail(error, "cuda matmul_quantized_many: outputs must be 4-byte aligned");
    }
  }
  if (!set->matmul_many) {
    return fail(error, "cuda matmul_quantized_many: no quantized decode for this weight type");
  }
  return set->matmul_many({ws, n_rows, ys, n, n_cols, row_bytes, n_tokens, xq, stream, cpu_order,
                           cpu_tiled(cpu_order, n_tokens)},
                          error);
}

bool get_rows(QType type, const void* table, int64_t n_cols, const int32_t* ids, int64_t n,
              float* out, void* stream, std::string* error) {
  int64_t row_bytes = 0;
  const quant::KernelSet* set = checked_set("get_rows", type, table, n_cols, &row_bytes, error);
  if (!set) return false;
  if (n < 0) return fail(error, "cuda get_rows: negative id count");
  if (n == 0) return true;
  if (!ids || !out || !aligned(out, 16)) {
    return fail(error, "cuda get_rows: ids missing or output not 16-byte aligned");
  }
  return set->get_rows({table, n_cols, row_bytes, ids, n, out, stream}, error);
}

}  // namespace sluice::cuda
