// The scalar half-row kernels, which reproduce the AVX2 ones' order of operations exactly
// (eight lanes per accumulator, fused multiply-adds), and the run-time choice between them.
#include "backend/cpu/f16_rows.h"

#include <cmath>

#include "backend/cpu/vec_dot.h"
#include "core/half.h"

namespace sluice::cpu {
namespace {

void fp32_to_fp16_row_scalar(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

float dot_f16_scalar(const uint16_t* a, const uint16_t* b, int64_t n) {
  float sum[4][8] = {};
  const int64_t n32 = n & ~int64_t(31);
  for (int64_t i = 0; i < n32; i += 32) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 8; ++l) {
        const int64_t k = i + 8 * j + l;
        sum[j][l] = std::fma(fp16_to_fp32(a[k]), fp16_to_fp32(b[k]), sum[j][l]);
      }
    }
  }
  float lanes[8];
  for (int l = 0; l < 8; ++l) lanes[l] = (sum[0][l] + sum[2][l]) + (sum[1][l] + sum[3][l]);
  // 128-bit halves added, then two horizontal adds: (h0 + h1) + (h2 + h3).
  float h[4];
  for (int l = 0; l < 4; ++l) h[l] = lanes[l] + lanes[l + 4];
  double total = (h[0] + h[1]) + (h[2] + h[3]);
  for (int64_t i = n32; i < n; ++i) total += double(fp16_to_fp32(a[i]) * fp16_to_fp32(b[i]));
  return float(total);
}

void mad_f16_scalar(uint16_t* y, const uint16_t* x, float v, int64_t n) {
  const int64_t n8 = n & ~int64_t(7);
  for (int64_t i = 0; i < n8; ++i) {
    y[i] = fp32_to_fp16(std::fma(fp16_to_fp32(x[i]), v, fp16_to_fp32(y[i])));
  }
  for (int64_t i = n8; i < n; ++i) y[i] = fp32_to_fp16(fp16_to_fp32(x[i]) * v + fp16_to_fp32(y[i]));
}

void scale_f16_scalar(uint16_t* y, float v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(fp16_to_fp32(y[i]) * v);
}

}  // namespace

const HalfRowKernels& half_row_kernels() {
  static const HalfRowKernels kernels =
      isa_supported(CpuIsa::kAvx2)
          ? HalfRowKernels{fp32_to_fp16_row_avx2, dot_f16_avx2, mad_f16_avx2, scale_f16_avx2}
          : HalfRowKernels{fp32_to_fp16_row_scalar, dot_f16_scalar, mad_f16_scalar,
                           scale_f16_scalar};
  return kernels;
}

}  // namespace sluice::cpu
