// Reference dot products of FP8 block-scaled weights (E4M3 with a float32 scale per block of
// columns, DeepSeek / GLM `weight_scale_inv`) against float32 activations: the specification of
// backend/cpu's fp8 kernels. Products and sums are plain float, one rounding each, in the order
// dot_reference.h states; the file is built without FMA contraction (root CMakeLists.txt).
#include "quant/dot_reference.h"

#include "core/error.h"
#include "quant/float_formats.h"

namespace sluice {

float vec_dot_fp8_e4m3_block_scaled_reference(const uint8_t* w_row, const float* block_scales,
                                              const float* x, int64_t n, int64_t block) {
  if (n < 0 || block <= 0) fail("fp8 dot: bad length ", n, " or block ", block);
  float sum = 0.0f;
  for (int64_t lo = 0, b = 0; lo < n; lo += block, ++b) {
    const int64_t hi = n - lo < block ? n : lo + block;
    float block_sum = 0.0f;
    for (int64_t i = lo; i < hi; ++i) block_sum += fp8_e4m3_to_fp32(w_row[i]) * x[i];
    sum += block_sum * block_scales[b];
  }
  return sum;
}

const float* fp8_row_block_scales(const float* scale_inv, int64_t row, int64_t cols,
                                  int64_t block_rows, int64_t block_cols) {
  if (row < 0 || cols < 0 || block_rows <= 0 || block_cols <= 0) {
    fail("fp8 scales: bad row ", row, " of ", cols, " columns with blocks [", block_rows, ", ",
         block_cols, "]");
  }
  const int64_t scale_cols = (cols + block_cols - 1) / block_cols;
  return scale_inv + (row / block_rows) * scale_cols;
}

void matvec_fp8_e4m3_block_scaled_reference(const uint8_t* weight, const float* scale_inv,
                                            const float* x, float* y, int64_t rows, int64_t cols,
                                            int64_t block_rows, int64_t block_cols) {
  if (rows < 0) fail("fp8 matvec: bad row count ", rows);
  for (int64_t r = 0; r < rows; ++r) {
    const float* scales = fp8_row_block_scales(scale_inv, r, cols, block_rows, block_cols);
    y[r] = vec_dot_fp8_e4m3_block_scaled_reference(weight + r * cols, scales, x, cols, block_cols);
  }
}

}  // namespace sluice
