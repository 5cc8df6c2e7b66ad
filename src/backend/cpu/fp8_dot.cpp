// FP8 block-scaled kernel lookup and matvec's validation and row split (chunks of whole rows,
// as matvec.cpp sizes them). Baseline code only: an ISA kernel is called only after
// isa_supported() has confirmed the CPU runs it.
#include "backend/cpu/fp8_dot.h"

#include "backend/cpu/vec_dot_table.h"
#include "core/error.h"
#include "quant/dot_reference.h"

namespace sluice::cpu {

Fp8DotKernel fp8_e4m3_dot_kernel(CpuIsa isa) {
  if (!isa_supported(isa)) fail("fp8 dot: this CPU cannot run ", isa_name(isa), " kernels");
  switch (isa) {
    case CpuIsa::kAvx2:
      return {vec_dot_fp8_e4m3_avx2, CpuIsa::kAvx2};
    case CpuIsa::kAvx512:
      return {vec_dot_fp8_e4m3_avx512, CpuIsa::kAvx512};
    case CpuIsa::kScalar:
      break;
  }
  return {vec_dot_fp8_e4m3_block_scaled_reference, CpuIsa::kScalar};
}

void matvec_fp8_e4m3_block_scaled(const uint8_t* w, const float* scale_inv, const float* x,
                                  float* y, int64_t rows, int64_t cols, ThreadPool* pool) {
  matvec_fp8_e4m3_block_scaled(w, scale_inv, x, y, rows, cols, pool, best_isa());
}

void matvec_fp8_e4m3_block_scaled(const uint8_t* w, const float* scale_inv, const float* x,
                                  float* y, int64_t rows, int64_t cols, ThreadPool* pool,
                                  CpuIsa isa) {
  const Fp8DotFn dot = fp8_e4m3_dot_kernel(isa).fn;
  if (rows < 0 || cols < 0) fail("fp8 matvec: bad shape [", rows, ", ", cols, "]");
  const int64_t scale_cols = (cols + kFp8BlockSize - 1) / kFp8BlockSize;
  auto body = [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const float* scales = scale_inv + (r / kFp8BlockSize) * scale_cols;  // [scale_cols]
      y[r] = dot(w + r * cols, scales, x, cols, kFp8BlockSize);
    }
  };
  const int n_threads = pool != nullptr ? pool->size() : 1;
  if (n_threads == 1) {
    body(0, rows);
    return;
  }
  int64_t chunk = rows / (4 * n_threads);
  if (chunk < 1) chunk = 1;
  pool->parallel_for(0, rows, chunk, body);
}

}  // namespace sluice::cpu
