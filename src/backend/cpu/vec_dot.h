// The CPU dot-product kernels of every weight type, one table per instruction set: scalar (the
// quant/ reference), AVX2 and AVX-512, each falling back to the one below for types it lacks.
// The best table for this CPU is chosen once, from core/cpu_features. Knows nothing of tensors,
// threads or models; matvec.h builds on it.
#pragma once

#include <cstdint>
#include <string_view>

#include "quant/dot_reference.h"
#include "quant/qtype.h"

namespace sluice::cpu {

enum class CpuIsa : uint8_t { kScalar, kAvx2, kAvx512 };

std::string_view isa_name(CpuIsa isa);  // "scalar", "avx2", "avx512"

// Whether this CPU runs kernels compiled for `isa`. AVX-512 needs F, BW, VL and VNNI: the
// kernels use VNNI, and the compiler may emit it for those files on its own.
bool isa_supported(CpuIsa isa);

// The widest supported ISA; the one matvec uses. SLUICE_CPU_ISA=avx2 caps it at AVX2 on an
// AVX-512 CPU: the float order of a llama.cpp build without AVX-512 (PyPI's portable wheels), to
// compare with one bit for bit; any other value but avx512 is an error.
CpuIsa best_isa();

// Up to four activation rows (n_x <= 4, x_stride bytes apart) against one weight row, writing
// out[t * out_stride]; their block scales were converted to float once per matmul instead of
// once per weight row: x_scales[t * scales_stride + 2 * block] is the block's
// d and the next float its s (Q8_1; unused for Q8_0). Bit-identical to its single kernel.
using VecDotScaledFn = void (*)(const void* weight, const void* activations, int64_t x_stride,
                                const float* x_scales, int64_t scales_stride, int64_t n_x,
                                float* out, int64_t out_stride, int64_t n_elements);

// A table entry: the single kernel and, where one exists, its scaled twin — one entry, so that a
// wider table replacing a kernel replaces (or drops) the twin with it.
struct VecDotKernel {
  VecDotFn fn = nullptr;            // nullptr: the weight type has no dot product
  CpuIsa isa = CpuIsa::kScalar;     // the ISA whose code `fn` is (after fallback)
  VecDotScaledFn scaled = nullptr;  // `fn` over up to four activation rows, or none
};

// The scaled kernel of `weight` in the best table, or nullptr where there is none.
VecDotScaledFn vec_dot_scaled_kernel(QType weight);

// The kernel of `weight` in the `isa` table. Precondition: isa_supported(isa).
VecDotKernel vec_dot_kernel(QType weight, CpuIsa isa);
inline VecDotKernel vec_dot_kernel(QType weight) {
  return vec_dot_kernel(weight, best_isa());
}

}  // namespace sluice::cpu
