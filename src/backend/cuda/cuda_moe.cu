// MoE gather / scatter / weighted_sum (cuda_ops.h). The row lists come from the host (routing
// runs there); weighted_sum's weights are device memory. Short lists — every decode step — travel
// inside the kernel's parameters (`__grid_constant__`, read from the constant bank), so there is
// no copy at all, the call stays stream-ordered and a graph capture records them by value (a
// replayed step must bring the same entries: they are part of its signature); longer lists
// (prefill) are copied into a grow-only device scratch on the stream first. That copy is ordered
// after every kernel already queued, so a later call cannot overwrite a list an earlier kernel
// still has to read; growing the scratch waits for the stream before the old allocation is freed.
#include <cstring>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_ops.h"

namespace sluice::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kChunk = kThreads * 4;  // floats per block along a row: 4 per thread
constexpr int64_t kInlineEntries = kInlineRowEntries;

// A list of 32-bit row indices: in the parameters when short, else
// in device memory.
struct List {
  const uint32_t* device = nullptr;  // nullptr: the entries are in `values`
  uint32_t values[kInlineEntries];
};

__device__ __forceinline__ uint32_t entry(const List& list, int64_t i) {
  return list.device != nullptr ? list.device[i] : list.values[i];
}

// Rows dst_row(i) of dst = rows src_row(i) of src: gather reads src[list[i]], scatter writes
// dst[list[i]]. Block (i, chunk): one row's chunk of kChunk floats, float4 when aligned.
template <bool kScatter, bool kVector>
__global__ void __launch_bounds__(kThreads)
    move_rows_kernel(const float* __restrict__ src, float* __restrict__ dst, int64_t n_cols,
                     const __grid_constant__ List list) {
  const int64_t i = blockIdx.x;
  const int64_t listed = int64_t(entry(list, i));
  const int64_t src_row = kScatter ? i : listed;
  const int64_t dst_row = kScatter ? listed : i;
  const float* from = src + src_row * n_cols;
  float* to = dst + dst_row * n_cols;
  const int64_t begin = int64_t(blockIdx.y) * kChunk;
  if (kVector) {
    const int64_t c = begin + int64_t(threadIdx.x) * 4;
    if (c < n_cols) {
      *reinterpret_cast<float4*>(to + c) = *reinterpret_cast<const float4*>(from + c);
    }
  } else {
    for (int64_t c = begin + threadIdx.x; c < begin + kChunk && c < n_cols; c += kThreads) {
      to[c] = from[c];
    }
  }
}

// out[t, j] = Σ_c w[t, c] y[t, c, j]: each product rounded, then added in the order of c, as
// CpuBackend (and llama.cpp's MoE combine) does; __fmul_rn / __fadd_rn stop nvcc from fusing
// them into an FMA. Block (t, chunk), 4 columns per thread.
template <bool kVector>
__global__ void __launch_bounds__(kThreads)
    weighted_sum_kernel(const float* __restrict__ y, int64_t k, int64_t n, float* __restrict__ out,
                        const float* __restrict__ weights) {
  wait_for_prerequisite();  // launched as a dependent (cuda_launch.cuh)
  allow_dependent_launch();
  const int64_t t = blockIdx.x;
  const int64_t j = int64_t(blockIdx.y) * kChunk + int64_t(threadIdx.x) * 4;
  if (j >= n) return;
  const float* rows = y + t * k * n;
  if (kVector) {
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int64_t c = 0; c < k; ++c) {
      const float w = weights[t * k + c];
      const float4 v = *reinterpret_cast<const float4*>(rows + c * n + j);
      const float4 p =
          make_float4(__fmul_rn(v.x, w), __fmul_rn(v.y, w), __fmul_rn(v.z, w), __fmul_rn(v.w, w));
      if (c == 0) {
        acc = p;
      } else {
        acc = make_float4(__fadd_rn(acc.x, p.x), __fadd_rn(acc.y, p.y), __fadd_rn(acc.z, p.z),
                          __fadd_rn(acc.w, p.w));
      }
    }
    *reinterpret_cast<float4*>(out + t * n + j) = acc;
  } else {
    const int64_t end = j + 4 < n ? j + 4 : n;
    for (int64_t col = j; col < end; ++col) {
      float acc = 0.0f;
      for (int64_t c = 0; c < k; ++c) {
        const float p = __fmul_rn(rows[c * n + col], weights[t * k + c]);
        acc = c == 0 ? p : __fadd_rn(acc, p);
      }
      out[t * n + col] = acc;
    }
  }
}

bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

// The list of `count` 32-bit host entries, inline or copied into `scratch` on the stream.
List make_list(const void* host, int64_t count, DeviceBuffer& scratch, cudaStream_t stream) {
  List list{};
  const size_t bytes = size_t(count) * sizeof(uint32_t);
  if (count <= kInlineEntries) {
    std::memcpy(list.values, host, bytes);
    return list;
  }
  if (scratch.size() < bytes) {
    // Kernels queued earlier may still read the old scratch: let them finish before it goes.
    check(cudaStreamSynchronize(stream), "stream synchronize");
    scratch.reserve(bytes);
  }
  // From pageable memory the copy is staged before it returns (the host list is free again) and
  // runs in stream order: after the kernels that read this scratch before.
  check(cudaMemcpyAsync(scratch.data(), host, bytes, cudaMemcpyHostToDevice, stream),
        "copy routing list to device");
  list.device = scratch.as<const uint32_t>();
  return list;
}

// Shared checks of gather / scatter; false when there is nothing to do.
bool check_rows(const char* op, const float* src, const int32_t* rows, int64_t n, int64_t n_cols,
                const float* dst) {
  if (n < 0 || n_cols < 0) fail("cuda: ", op, ": negative size (n ", n, ", n_cols ", n_cols, ")");
  if (n == 0 || n_cols == 0) return false;
  if (src == nullptr || rows == nullptr || dst == nullptr) fail("cuda: ", op, ": null pointer");
  if (n > INT32_MAX || (n_cols + kChunk - 1) / kChunk > 65535) {
    fail("cuda: ", op, ": ", n, " rows of ", n_cols, " is too large a grid");
  }
  for (int64_t i = 0; i < n; ++i) {
    if (rows[i] < 0) fail("cuda: ", op, ": row index ", rows[i], " at ", i, " is negative");
  }
  return true;
}

template <bool kScatter>
void launch_move_rows(const float* src, const int32_t* rows, int64_t n, int64_t n_cols, float* dst,
                      DeviceBuffer& scratch, cudaStream_t stream) {
  const char* op = kScatter ? "scatter_rows" : "gather_rows";
  if (!check_rows(op, src, rows, n, n_cols, dst)) return;
  const List list = make_list(rows, n, scratch, stream);
  const dim3 grid(unsigned(n), unsigned((n_cols + kChunk - 1) / kChunk));
  if (n_cols % 4 == 0 && aligned16(src) && aligned16(dst)) {
    move_rows_kernel<kScatter, true><<<grid, kThreads, 0, stream>>>(src, dst, n_cols, list);
  } else {
    move_rows_kernel<kScatter, false><<<grid, kThreads, 0, stream>>>(src, dst, n_cols, list);
  }
  check_launch(op);
}

}  // namespace

void launch_gather_rows(const float* src, const int32_t* rows, int64_t n, int64_t n_cols,
                        float* dst, DeviceBuffer& scratch, cudaStream_t stream) {
  launch_move_rows<false>(src, rows, n, n_cols, dst, scratch, stream);
}

void launch_scatter_rows(const float* src, const int32_t* rows, int64_t n, int64_t n_cols,
                         float* dst, DeviceBuffer& scratch, cudaStream_t stream) {
  launch_move_rows<true>(src, rows, n, n_cols, dst, scratch, stream);
}

void launch_weighted_sum(const float* y, const float* weights, int64_t n_tokens, int64_t k,
                         int64_t n, float* out, cudaStream_t stream) {
  if (n_tokens < 0 || k < 0 || n < 0) {
    fail("cuda: weighted_sum: negative size (n_tokens ", n_tokens, ", k ", k, ", n ", n, ")");
  }
  if (n_tokens == 0 || k == 0 || n == 0) return;  // k == 0: `out` untouched, as on the CPU
  if (y == nullptr || weights == nullptr || out == nullptr) {
    fail("cuda: weighted_sum: null pointer");
  }
  if (n_tokens > INT32_MAX || (n + kChunk - 1) / kChunk > 65535) {
    fail("cuda: weighted_sum: ", n_tokens, " rows of ", n, " is too large a grid");
  }
  const dim3 grid(unsigned(n_tokens), unsigned((n + kChunk - 1) / kChunk));
  const bool vector = n % 4 == 0 && aligned16(y) && aligned16(out);
  check(launch_chained(vector ? weighted_sum_kernel<true> : weighted_sum_kernel<false>, grid,
                       dim3(kThreads), 0, stream, y, k, n, out, weights),
        "weighted_sum");
}

}  // namespace sluice::cuda
