// RMS norm on the device, in CpuBackend's arithmetic: squares rounded to float and summed in
// double (here by a block reduction instead of left to right: the double sum differs only far
// below float precision), mean and 1 / sqrt(mean + eps) in float, then (x * factor) * weight.
// add_rms_norm fuses the residual add before it (x += branch, as add_kernel: one rounded float
// addition per element) into the same block, so it gives the bits of add then rms_norm.
// post_norm_add_rms_norm puts the sandwich block's post-norm of the branch in front of that, in
// the same block and through the same reduction: the bits of rms_norm, add, rms_norm.
// Each may also quantize its output row for the decode product that reads it (RowQuantize,
// cuda_ops.h): the same store_q8_*_block as the quantize kernels, on the row it just wrote.
// Rows of up to 8192 elements (every model's hidden row) take register_norm_kernel, which keeps
// a thread's elements in registers from load to store; longer or unaligned ones the strided
// kernels. All are launched as dependents of the kernel ahead (cuda_launch.cuh).
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_math.cuh"
#include "backend/cuda/cuda_norm.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/quant_int8_matvec.cuh"

namespace sluice::cuda {
namespace {

using quant::QuantizedRows;

constexpr int kThreads = 256;

enum class RowFormat { kNone, kQ8K, kQ8_0, kQ8_1 };

// After the block wrote its output row (n floats at `row`, row blockIdx.x of the output): the
// row's activation blocks quantized into q by the block's warps, one warp per block as the
// quantize kernels (quant_int8_matvec.cuh) do, so the bytes are theirs.
template <RowFormat kFormat>
__device__ __forceinline__ void quantize_row(const float* row, int64_t n, const QuantizedRows& q) {
  if constexpr (kFormat != RowFormat::kNone) {
    constexpr int kBlock = kFormat == RowFormat::kQ8K ? 256 : 32;
    __syncthreads();  // every thread's stores of the row are visible to the whole block
    const int lane = threadIdx.x % 32;
    const int64_t per_row = n / kBlock;
    for (int64_t j = threadIdx.x / 32; j < per_row; j += blockDim.x / 32) {
      const int64_t block = int64_t(blockIdx.x) * per_row + j;
      if constexpr (kBlock == 256) {
        const float4* src = reinterpret_cast<const float4*>(row + 256 * j + 8 * lane);
        const float4 a = src[0], b = src[1];
        const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
        quant::store_q8_k_block(v, lane, block, q);
      } else {
        quant::store_q8_0_block<kFormat == RowFormat::kQ8_1>(row[32 * j + lane], lane, block, q);
      }
    }
  }
}

// One block per row. In place is safe: every x is read before the reduction's barriers and
// each y[i] is written by the thread that read x[i].
template <RowFormat kFormat>
__global__ void rms_norm_kernel(const float* x, const float* weight, float* y, int64_t n, float eps,
                                QuantizedRows q) {
  __shared__ double scratch[32];
  wait_for_prerequisite();  // launched as a dependent (cuda_launch.cuh)
  allow_dependent_launch();
  const float* in = x + int64_t(blockIdx.x) * n;
  const float factor = rms_factor(sum_squares(in, n), n, eps, scratch);
  scale_row(in, factor, weight, y + int64_t(blockIdx.x) * n, n);
  quantize_row<kFormat>(y + int64_t(blockIdx.x) * n, n, q);
}

// One block per row: x[i] += branch[i], then the norm of the sums into xn. Each thread reads
// back only the sums it wrote, and writes xn[i] only after reading branch[i] (xn may be branch).
template <RowFormat kFormat>
__global__ void add_rms_norm_kernel(float* x, const float* branch, const float* weight, float* xn,
                                    int64_t n, float eps, QuantizedRows q) {
  __shared__ double scratch[32];
  wait_for_prerequisite();  // launched as a dependent (cuda_launch.cuh)
  allow_dependent_launch();
  float* row = x + int64_t(blockIdx.x) * n;
  const float* add = branch + int64_t(blockIdx.x) * n;
  double local = 0.0;
  for (int64_t base = threadIdx.x; base < n; base += kRowBatch * int64_t(blockDim.x)) {
    float a[kRowBatch], b[kRowBatch];  // batched loads (cuda_norm.cuh)
#pragma unroll
    for (int k = 0; k < kRowBatch; ++k) {
      const int64_t i = base + k * int64_t(blockDim.x);
      a[k] = i < n ? row[i] : 0.0f;
      b[k] = i < n ? add[i] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kRowBatch; ++k) {
      const int64_t i = base + k * int64_t(blockDim.x);
      if (i >= n) break;
      const float sum = __fadd_rn(a[k], b[k]);
      row[i] = sum;
      local += double(__fmul_rn(sum, sum));
    }
  }
  const float factor = rms_factor(local, n, eps, scratch);
  scale_row(row, factor, weight, xn + int64_t(blockIdx.x) * n, n);
  quantize_row<kFormat>(xn + int64_t(blockIdx.x) * n, n, q);
}

// One block per row: branch = rms_norm(branch) * post_weight in place, x[i] += branch[i], then
// (xn not nullptr) the norm of the sums into xn — rms_norm_kernel, add_kernel, rms_norm_kernel
// element for element, both reductions over the same threads as rms_norm_kernel's. Each thread
// touches only its own elements after the first reduction's barriers, so branch[i] is read
// before it is overwritten and xn[i] (which may be branch[i]) is written last.
template <RowFormat kFormat>
__global__ void post_norm_add_rms_norm_kernel(float* x, float* branch, const float* post_weight,
                                              float post_eps, const float* weight, float* xn,
                                              int64_t n, float eps, QuantizedRows q) {
  __shared__ double scratch[32];
  wait_for_prerequisite();  // launched as a dependent (cuda_launch.cuh)
  allow_dependent_launch();
  float* row = x + int64_t(blockIdx.x) * n;
  float* add = branch + int64_t(blockIdx.x) * n;
  const float post_factor = rms_factor(sum_squares(add, n), n, post_eps, scratch);
  double local = 0.0;
  for (int64_t base = threadIdx.x; base < n; base += kRowBatch * int64_t(blockDim.x)) {
    float a[kRowBatch], b[kRowBatch], w[kRowBatch];  // batched loads (cuda_norm.cuh)
#pragma unroll
    for (int k = 0; k < kRowBatch; ++k) {
      const int64_t i = base + k * int64_t(blockDim.x);
      a[k] = i < n ? row[i] : 0.0f;
      b[k] = i < n ? add[i] : 0.0f;
      w[k] = i < n && post_weight != nullptr ? post_weight[i] : 1.0f;
    }
#pragma unroll
    for (int k = 0; k < kRowBatch; ++k) {
      const int64_t i = base + k * int64_t(blockDim.x);
      if (i >= n) break;
      const float scaled = __fmul_rn(b[k], post_factor);
      const float normed = post_weight != nullptr ? __fmul_rn(scaled, w[k]) : scaled;
      add[i] = normed;
      const float sum = __fadd_rn(a[k], normed);
      row[i] = sum;
      local += double(__fmul_rn(sum, sum));
    }
  }
  if (xn == nullptr) return;  // the same for every thread of the grid
  const float factor = rms_factor(local, n, eps, scratch);
  scale_row(row, factor, weight, xn + int64_t(blockIdx.x) * n, n);
  quantize_row<kFormat>(xn + int64_t(blockIdx.x) * n, n, q);
}

// ---- decode-sized rows in registers ---------------------------------------------------------
// Rows of up to kMaxRegisterRow elements, a multiple of 8, every pointer 16-byte aligned (every
// model's hidden row): thread t keeps elements 8t .. 8t + 7 in registers from their load to the
// stores, so the row crosses memory once each way — the kernels above read it again to scale
// it, and a quantizing norm a third time — and a warp holds one Q8_K block, quantized from
// its registers. The same element arithmetic as the kernels above; only the threads' shares of
// the double sums differ (their order, far below float precision).
constexpr int64_t kMaxRegisterRow = 8 * 1024;

enum class NormKind { kRms, kAddRms, kPostNormAddRms };

// One norm op's operands; row r of each at r * n. branch / post_weight: as the op has them.
struct NormRows {
  float* x;
  float* branch;
  const float* post_weight;
  float post_eps;
  const float* weight;
  float* y;
  int64_t n;
  float eps;
  QuantizedRows q;
};

__device__ __forceinline__ void load8(const float* p, float (&v)[8]) {
  const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
__device__ __forceinline__ void store8(float* p, const float (&v)[8]) {
  reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}
// (v * factor) * weight, or v * factor without a weight; in place.
__device__ __forceinline__ void scale8(float (&v)[8], float factor, const float* weight,
                                       const float (&w)[8]) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float scaled = __fmul_rn(v[j], factor);
    v[j] = weight != nullptr ? __fmul_rn(scaled, w[j]) : scaled;
  }
}
// sum_squares_by_eights (cuda_norm.cuh) on a thread's registers: the same additions.
__device__ __forceinline__ double squares8(const float (&v)[8]) {
  double local = 0.0;
#pragma unroll
  for (int j = 0; j < 8; ++j) local += double(__fmul_rn(v[j], v[j]));
  return local;
}

template <NormKind kKind, RowFormat kFormat>
__global__ void __launch_bounds__(1024) register_norm_kernel(NormRows a) {
  __shared__ double scratch[32];
  const int64_t n = a.n;
  const int64_t i = 8 * int64_t(threadIdx.x);
  const bool mine = i < n;  // whole warps past the row's end hold zeros
  const int64_t row = int64_t(blockIdx.x) * n + i;
  // The weights are the model's: no kernel writes them, so they load before the wait.
  float w[8] = {}, pw[8] = {};
  if (mine && a.weight != nullptr) load8(a.weight + i, w);
  if (kKind == NormKind::kPostNormAddRms && mine && a.post_weight != nullptr) {
    load8(a.post_weight + i, pw);
  }
  wait_for_prerequisite();  // launched as a dependent (cuda_launch.cuh)
  allow_dependent_launch();
  float v[8] = {};
  if (mine) load8(a.x + row, v);
  if constexpr (kKind != NormKind::kRms) {
    float b[8] = {};
    if (mine) load8(a.branch + row, b);
    if constexpr (kKind == NormKind::kPostNormAddRms) {
      scale8(b, rms_factor(squares8(b), n, a.post_eps, scratch), a.post_weight, pw);
      if (mine) store8(a.branch + row, b);
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = __fadd_rn(v[j], b[j]);
    if (mine) store8(a.x + row, v);
    if (kKind == NormKind::kPostNormAddRms && a.y == nullptr) return;  // the same for the grid
  }
  scale8(v, rms_factor(squares8(v), n, a.eps, scratch), a.weight, w);
  if (mine) store8(a.y + row, v);
  if constexpr (kFormat == RowFormat::kQ8K) {
    // n is a multiple of 256: warp k holds exactly block k of the row, lane L its 8 L .. 8 L + 7.
    if (mine) {
      quant::store_q8_k_block(v, int(threadIdx.x % 32),
                              int64_t(blockIdx.x) * (n / 256) + threadIdx.x / 32, a.q);
    }
  } else {
    quantize_row<kFormat>(a.y + int64_t(blockIdx.x) * n, n, a.q);
  }
}

// Whether a norm's rows can take register_norm_kernel.
bool fits_registers(const NormRows& a) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return a.n <= kMaxRegisterRow && a.n % 8 == 0 && aligned(a.x) && aligned(a.branch) &&
         aligned(a.post_weight) && aligned(a.weight) && aligned(a.y);
}

template <NormKind kKind, RowFormat kFormat>
void launch_register_norm(const NormRows& a, int64_t n_rows, cudaStream_t stream) {
  const unsigned threads = unsigned((a.n / 8 + 31) / 32 * 32);
  check(launch_chained(register_norm_kernel<kKind, kFormat>, dim3(unsigned(n_rows)), dim3(threads),
                       0, stream, a),
        "rms norm kernel");
}

void check_rows(const char* op, int64_t n_rows, int64_t n) {
  if (n <= 0) fail(op, ": rows of ", n, " elements");
  if (n_rows > int64_t(0x7fffffff)) fail(op, ": ", n_rows, " rows are too many");
}

template <RowFormat kFormat>
using FormatTag = std::integral_constant<RowFormat, kFormat>;

// Calls launch(FormatTag<format>{}) for the format `quantize` asks for, after checking what
// quantize_row assumes of the output `y`.
template <class Launch>
void with_row_format(const char* op, const RowQuantize& quantize, const float* y, int64_t n,
                     Launch&& launch) {
  if (quantize.out == nullptr) return launch(FormatTag<RowFormat::kNone>{});
  if ((quantize.block != 256 && quantize.block != 32) || n % quantize.block != 0) {
    fail(op, ": rows of ", n, " elements cannot be quantized in blocks of ", quantize.block);
  }
  if (y == nullptr || reinterpret_cast<uintptr_t>(y) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(quantize.out) % 16 != 0) {
    fail(op, ": a quantized norm's output and activations must be 16-byte aligned");
  }
  if (quantize.block == 256) return launch(FormatTag<RowFormat::kQ8K>{});
  if (quantize.with_sum) return launch(FormatTag<RowFormat::kQ8_1>{});
  return launch(FormatTag<RowFormat::kQ8_0>{});
}

QuantizedRows rows_of(const RowQuantize& quantize, int64_t n_rows, int64_t n) {
  if (quantize.out == nullptr) return QuantizedRows{};
  return quant::split_scratch(quantize.out, n_rows, n, quantize.block);
}

}  // namespace

void launch_rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n,
                     float eps, cudaStream_t stream, const RowQuantize& quantize) {
  if (n_rows <= 0) return;
  check_rows("rms_norm", n_rows, n);
  const QuantizedRows q = rows_of(quantize, n_rows, n);
  const NormRows rows{const_cast<float*>(x), nullptr, nullptr, 0.0f, weight, y, n, eps, q};
  with_row_format("rms_norm", quantize, y, n, [&](auto format) {
    if (fits_registers(rows)) {
      return launch_register_norm<NormKind::kRms, decltype(format)::value>(rows, n_rows, stream);
    }
    check(launch_chained(rms_norm_kernel<decltype(format)::value>, dim3(unsigned(n_rows)),
                         dim3(kThreads), 0, stream, x, weight, y, n, eps, q),
          "rms_norm kernel");
  });
  check_launch("rms_norm kernel");
}

void launch_add_rms_norm(float* x, const float* branch, const float* weight, float* xn,
                         int64_t n_rows, int64_t n, float eps, cudaStream_t stream,
                         const RowQuantize& quantize) {
  if (n_rows <= 0) return;
  check_rows("add_rms_norm", n_rows, n);
  if (x == xn) fail("add_rms_norm: the norm's output must not be x");
  const QuantizedRows q = rows_of(quantize, n_rows, n);
  const NormRows rows{x, const_cast<float*>(branch), nullptr, 0.0f, weight, xn, n, eps, q};
  with_row_format("add_rms_norm", quantize, xn, n, [&](auto format) {
    if (fits_registers(rows)) {
      return launch_register_norm<NormKind::kAddRms, decltype(format)::value>(rows, n_rows, stream);
    }
    check(launch_chained(add_rms_norm_kernel<decltype(format)::value>, dim3(unsigned(n_rows)),
                         dim3(kThreads), 0, stream, x, branch, weight, xn, n, eps, q),
          "add_rms_norm kernel");
  });
  check_launch("add_rms_norm kernel");
}

void launch_post_norm_add_rms_norm(float* x, float* branch, const float* post_weight,
                                   float post_eps, const float* weight, float* xn, int64_t n_rows,
                                   int64_t n, float eps, cudaStream_t stream,
                                   const RowQuantize& quantize) {
  if (n_rows <= 0) return;
  check_rows("post_norm_add_rms_norm", n_rows, n);
  if (x == xn) fail("post_norm_add_rms_norm: the norm's output must not be x");
  if (x == branch) fail("post_norm_add_rms_norm: the branch must not be x");
  const RowQuantize none{};
  const RowQuantize& used = xn != nullptr ? quantize : none;  // no second norm: nothing to quantize
  const QuantizedRows q = rows_of(used, n_rows, n);
  const NormRows rows{x, branch, post_weight, post_eps, weight, xn, n, eps, q};
  with_row_format("post_norm_add_rms_norm", used, xn, n, [&](auto format) {
    if (fits_registers(rows)) {
      return launch_register_norm<NormKind::kPostNormAddRms, decltype(format)::value>(rows, n_rows,
                                                                                      stream);
    }
    check(launch_chained(post_norm_add_rms_norm_kernel<decltype(format)::value>,
                         dim3(unsigned(n_rows)), dim3(kThreads), 0, stream, x, branch, post_weight,
                         post_eps, weight, xn, n, eps, q),
          "post_norm_add_rms_norm kernel");
  });
  check_launch("post_norm_add_rms_norm kernel");
}

}  // namespace sluice::cuda
