// The down product's input in one launch: glu_kernel's values (gate keeps them, as the glu op
// leaves it) quantized at once into the activation format of the down weight, as
// quantize_activations would quantize gate afterwards. The element and block arithmetic is
// shared with those two kernels (cuda_glu.cuh, quant_int8_matvec.cuh), so the values, the
// quantized activations and the product that reads them are the bits of glu, then matmul.
#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_glu.cuh"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/quant_int8_matvec.cuh"

namespace sluice::cuda {
namespace {

using quant::kQuantizeWarps;
using quant::QuantizedRows;

// Q8_K: one warp per 256-element block, 8 elements per lane (n_cols is a multiple of 256, so
// a lane's elements share one row; gate and up are 16-byte aligned).
template <GluActivation kAct>
__global__ void __launch_bounds__(32 * kQuantizeWarps)
    glu_quantize_q8_k_kernel(float* __restrict__ gate, const float* __restrict__ up,
                             int64_t n_blocks_total, int64_t n_cols, int64_t n_vector,
                             const uint16_t* __restrict__ table, QuantizedRows q) {
  wait_for_prerequisite();  // launched as a dependent (cuda_launch.cuh)
  allow_dependent_launch();
  const int lane = threadIdx.x % 32;
  const int64_t block = int64_t(blockIdx.x) * kQuantizeWarps + threadIdx.x / 32;
  if (block >= n_blocks_total) return;
  const int64_t first = block * 256 + 8 * lane;
  const int64_t col = first % n_cols;
  float4* g4 = reinterpret_cast<float4*>(gate + first);
  const float4* u4 = reinterpret_cast<const float4*>(up + first);
  const float4 ga = g4[0], gb = g4[1], ua = u4[0], ub = u4[1];
  const float g[8] = {ga.x, ga.y, ga.z, ga.w, gb.x, gb.y, gb.z, gb.w};
  const float u[8] = {ua.x, ua.y, ua.z, ua.w, ub.x, ub.y, ub.z, ub.w};
  float v[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] = glu_value<kAct>(g[j], u[j], col + j, n_vector, table);
  g4[0] = make_float4(v[0], v[1], v[2], v[3]);
  g4[1] = make_float4(v[4], v[5], v[6], v[7]);
  quant::store_q8_k_block(v, lane, block, q);
}

// Q8_0 / Q8_1 (kWithSum): one warp per 32-element block, one element per lane.
template <GluActivation kAct, bool kWithSum>
__global__ void __launch_bounds__(32 * kQuantizeWarps)
    glu_quantize_q8_0_kernel(float* __restrict__ gate, const float* __restrict__ up,
                             int64_t n_blocks_total, int64_t n_cols, int64_t n_vector,
                             const uint16_t* __restrict__ table, QuantizedRows q) {
  wait_for_prerequisite();  // launched as a dependent (cuda_launch.cuh)
  allow_dependent_launch();
  const int lane = threadIdx.x % 32;
  const int64_t block = int64_t(blockIdx.x) * kQuantizeWarps + threadIdx.x / 32;
  if (block >= n_blocks_total) return;
  const int64_t i = block * 32 + lane;
  const float v = glu_value<kAct>(gate[i], up[i], i % n_cols, n_vector, table);
  gate[i] = v;
  quant::store_q8_0_block<kWithSum>(v, lane, block, q);
}

template <GluActivation kAct>
void launch_for(float* gate, const float* up, int64_t n_tokens, int64_t n_cols,
                const uint16_t* table, int activation_block, bool with_sum, void* out,
                cudaStream_t stream) {
  const QuantizedRows q = quant::split_scratch(out, n_tokens, n_cols, activation_block);
  const int64_t n_blocks = n_tokens * (n_cols / activation_block);
  const unsigned grid = unsigned((n_blocks + kQuantizeWarps - 1) / kQuantizeWarps);
  const int64_t n_vector = n_cols & ~int64_t(7);  // as launch_glu
  constexpr int kThreads = 32 * kQuantizeWarps;
  if (activation_block == 256) {
    launch_chained(glu_quantize_q8_k_kernel<kAct>, dim3(grid), dim3(kThreads), 0, stream, gate, up,
                   n_blocks, n_cols, n_vector, table, q);
  } else if (with_sum) {
    launch_chained(glu_quantize_q8_0_kernel<kAct, true>, dim3(grid), dim3(kThreads), 0, stream,
                   gate, up, n_blocks, n_cols, n_vector, table, q);
  } else {
    launch_chained(glu_quantize_q8_0_kernel<kAct, false>, dim3(grid), dim3(kThreads), 0, stream,
                   gate, up, n_blocks, n_cols, n_vector, table, q);
  }
}

}  // namespace

void launch_glu_quantize(GluActivation act, float* gate, const float* up, int64_t n_tokens,
                         int64_t n_cols, const uint16_t* gelu_f16_table, int activation_block,
                         bool with_sum, void* out, cudaStream_t stream) {
  if (act == GluActivation::kGeluTanhF16 && gelu_f16_table == nullptr) {
    fail("glu: the f16 GELU table is not on the device");
  }
  switch (act) {
    case GluActivation::kSilu:
      launch_for<GluActivation::kSilu>(gate, up, n_tokens, n_cols, gelu_f16_table, activation_block,
                                       with_sum, out, stream);
      break;
    case GluActivation::kGeluTanh:
      launch_for<GluActivation::kGeluTanh>(gate, up, n_tokens, n_cols, gelu_f16_table,
                                           activation_block, with_sum, out, stream);
      break;
    case GluActivation::kGeluTanhF16:
      launch_for<GluActivation::kGeluTanhF16>(gate, up, n_tokens, n_cols, gelu_f16_table,
                                              activation_block, with_sum, out, stream);
      break;
    case GluActivation::kSwigluOai:
      launch_for<GluActivation::kSwigluOai>(gate, up, n_tokens, n_cols, gelu_f16_table,
                                            activation_block, with_sum, out, stream);
      break;
  }
  check_launch("glu + quantize kernel");
}

}  // namespace sluice::cuda
