// expert_matmul.h's products: checks shapes and alignment on the host (one-line errors, never a
// crash), as quant_matmul.cu does for matmul, then hands the call to the type's ExpertKernelSet
// (quant_expert_kernels_*.cu).
#include <algorithm>
#include <cstdint>
#include <string>

#include "backend/cuda/expert_matmul.h"
#include "backend/cuda/quant_kernel_set.h"

namespace sluice::cuda {
namespace {

constexpr int64_t kMaxGrid = 65535;  // grid.y / grid.z limit
// By id: the most choices one launch takes (grid.y); a longer list (MLA's per-head products,
// n_tokens * n_head rows) runs as consecutive launches of this many.
constexpr int64_t kMaxChoices = kMaxGrid;

const quant::KernelSet* kernel_set(QType type) {
  if (const quant::KernelSet* set = quant::kernel_set_float(type)) return set;
  if (const quant::KernelSet* set = quant::kernel_set_legacy(type)) return set;
  if (const quant::KernelSet* set = quant::kernel_set_k(type)) return set;
  return quant::kernel_set_iq(type);
}

const quant::ExpertKernelSet* expert_kernel_set(QType type) {
  if (const quant::ExpertKernelSet* set = quant::expert_kernel_set_float(type)) return set;
  if (const quant::ExpertKernelSet* set = quant::expert_kernel_set_legacy(type)) return set;
  if (const quant::ExpertKernelSet* set = quant::expert_kernel_set_k(type)) return set;
  return quant::expert_kernel_set_iq(type);
}

bool fail(std::string* error, const std::string& message) {
  if (error) *error = message;
  return false;
}

bool aligned(const void* p, int64_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % uintptr_t(alignment) == 0;
}

// The checks both products share: a supported type, whole blocks, a stack whose every matrix is
// aligned as matmul wants its weights, at least a matrix apart, 16-byte aligned activations and
// 4-byte aligned outputs. Fills the stack's part of *args.
const quant::ExpertKernelSet* checked_stack(const char* op, const ExpertStackArgs& s,
                                            const float* x, const float* y,
                                            quant::ExpertMatmulArgs* args, std::string* error) {
  const std::string where =
      std::string("cuda ") + op + " (" + std::string(qtype_name(s.type)) + ")";
  const quant::KernelSet* set = kernel_set(s.type);
  const quant::ExpertKernelSet* experts = expert_kernel_set(s.type);
  if (!set || !experts) return fail(error, where + ": weight type not supported on CUDA"), nullptr;
  if (s.n_cols <= 0 || s.n_cols % set->elems_per_block != 0 ||
      (set->quantize && s.n_cols % set->activation_block != 0) || s.n_cols / 8 > INT32_MAX) {
    fail(error, where + ": n_cols " + std::to_string(s.n_cols) + " is not a positive multiple of " +
                    std::to_string(set->elems_per_block));
    return nullptr;
  }
  if (s.n_rows <= 0 || s.n_rows > INT32_MAX) {
    return fail(error, where + ": bad shape: " + std::to_string(s.n_rows) + " rows"), nullptr;
  }
  const int64_t matrix_row_bytes = int64_t(*row_bytes(s.type, uint64_t(s.n_cols)));
  if (s.n_rows > INT64_MAX / matrix_row_bytes || s.stride < s.n_rows * matrix_row_bytes ||
      s.stride % set->weight_align != 0) {
    fail(error, where + ": stride " + std::to_string(s.stride) + " is not a multiple of " +
                    std::to_string(set->weight_align) + " holding a whole matrix");
    return nullptr;
  }
  if (!s.base || !aligned(s.base, set->weight_align)) {
    fail(error, where + ": weights not aligned to " + std::to_string(set->weight_align) + " bytes");
    return nullptr;
  }
  if (!x || !y || !aligned(x, 16) || !aligned(y, 4)) {
    fail(error, where + ": activations must be 16-byte aligned, outputs 4-byte aligned");
    return nullptr;
  }
  *args = {};
  args->base = s.base;
  args->stride = s.stride;
  args->n_rows = s.n_rows;
  args->n_cols = s.n_cols;
  args->row_bytes = matrix_row_bytes;
  args->x = x;
  args->y = const_cast<float*>(y);
  return experts;
}

}  // namespace

bool expert_matmul_supported(QType type) {
  return kernel_set(type) != nullptr && expert_kernel_set(type) != nullptr;
}

bool matmul_by_id(const ExpertStackArgs& s, const int32_t* ids, int64_t n, const float* x,
                  int64_t n_inputs, float* y, void* stream, std::string* error, const void* xq) {
  if (n < 0 || n > INT32_MAX) {
    return fail(error, "cuda matmul_by_id: " + std::to_string(n) + " choices");
  }
  if (n == 0) return true;
  if (n_inputs != 1 && n_inputs != n) {
    return fail(error, "cuda matmul_by_id: " + std::to_string(n_inputs) + " input rows for " +
                           std::to_string(n) + " choices (1 or " + std::to_string(n) + " allowed)");
  }
  if (!ids) return fail(error, "cuda matmul_by_id: ids missing");
  if (xq && (n > kMaxChoices || n_inputs > 8 || !aligned(xq, 16))) {
    return fail(error, "cuda matmul_by_id: quantized activations for " + std::to_string(n_inputs) +
                           " rows, " + std::to_string(n) + " choices, or not 16-byte aligned");
  }
  quant::ExpertMatmulArgs args;
  const quant::ExpertKernelSet* set = checked_stack("matmul_by_id", s, x, y, &args, error);
  if (!set) return false;
  args.stream = stream;
  args.xq = xq;
  // Each row's numbers do not depend on the others' (its own activation quantization), so the
  // launches over consecutive slices give what one launch over all would.
  for (int64_t c0 = 0; c0 < n; c0 += kMaxChoices) {
    const int64_t slice = std::min(kMaxChoices, n - c0);
    args.ids = ids + c0;
    args.n = slice;
    args.n_inputs = n_inputs == 1 ? 1 : slice;
    args.x = x + (n_inputs == 1 ? 0 : c0 * s.n_cols);
    args.y = y + c0 * s.n_rows;
    if (!set->matmul_by_id(args, error)) return false;
  }
  return true;
}

bool matmul_grouped(const ExpertStackArgs& s, const int32_t* ids, const int32_t* offsets,
                    int64_t n_groups, int64_t max_rows, const float* x, float* y, void* stream,
                    std::string* error) {
  if (n_groups < 0 || n_groups > kMaxGrid || max_rows < 0 || (max_rows + 63) / 64 > kMaxGrid) {
    return fail(error, "cuda matmul_grouped: bad shape: " + std::to_string(n_groups) +
                           " groups of up to " + std::to_string(max_rows) + " rows");
  }
  if (n_groups == 0 || max_rows == 0) return true;
  if (!ids || !offsets) return fail(error, "cuda matmul_grouped: ids or offsets missing");
  quant::ExpertMatmulArgs args;
  const quant::ExpertKernelSet* set = checked_stack("matmul_grouped", s, x, y, &args, error);
  if (!set) return false;
  args.ids = ids;
  args.offsets = offsets;
  args.n = n_groups;
  args.max_rows = max_rows;
  args.stream = stream;
  return set->matmul_grouped(args, error);
}

}  // namespace sluice::cuda
