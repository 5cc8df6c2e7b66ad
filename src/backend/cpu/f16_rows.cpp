// The scalar half-row helpers and the run-time choice between them and the AVX2 versions.
#include "backend/cpu/f16_rows.h"

#include "backend/cpu/vec_dot.h"
#include "core/half.h"

namespace sluice::cpu {
namespace {

void fp32_to_fp16_row_scalar(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

void axpy_f16_scalar(float a, const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * fp16_to_fp32(x[i]);
}

}  // namespace

Fp32ToFp16RowFn fp32_to_fp16_row_kernel() {
  static const Fp32ToFp16RowFn fn =
      isa_supported(CpuIsa::kAvx2) ? fp32_to_fp16_row_avx2 : fp32_to_fp16_row_scalar;
  return fn;
}

AxpyF16Fn axpy_f16_kernel() {
  static const AxpyF16Fn fn = isa_supported(CpuIsa::kAvx2) ? axpy_f16_avx2 : axpy_f16_scalar;
  return fn;
}

}  // namespace sluice::cpu
