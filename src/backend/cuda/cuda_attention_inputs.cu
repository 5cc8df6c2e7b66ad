// Backend::attention_inputs on the device in one launch: per-head RMS norms of q and k, RoPE of
// both, and k / v into the cells — the bits of rms_norm_kernel, rope_kernel and kv_store's
// kernels (the norm's reduction and the rotation come from the same device functions, over the
// same 256 threads), six launches of a decode step's attention block in one. One block per
// (token, row): rows 0 … n_head-1 are q's heads, then k's, then v's. A q / k row is read into
// shared memory, normed there, then rotated pair by pair into place (and, for k, into the cell);
// a v row is only stored.
#include <cuda_fp16.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_norm.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_rope.cuh"

namespace sluice::cuda {
namespace {

constexpr int kThreads = 256;  // rms_norm_kernel's block: the same partial sums (strided rows)
constexpr int64_t kMaxHeadDim = 1024;

struct InputsParams {
  float* q;
  float* k;
  const float* v;
  int64_t n_head;
  const float* q_norm;
  const float* k_norm;
  float norm_eps;
  KvLayerView kv;
  RopeConstants rope;  // its position (pos0 / pos0_slot) is the first token's
};

__device__ __forceinline__ void store_cell(const KvLayerView& kv, void* cells, int64_t index,
                                           float value) {
  if (kv.type == KvElement::kF16) {
    static_cast<__half*>(cells)[index] = __float2half_rn(value);
  } else {
    static_cast<float*>(cells)[index] = value;
  }
}

__global__ void __launch_bounds__(kThreads) attention_inputs_kernel(InputsParams p) {
  __shared__ float row_values[kMaxHeadDim];
  __shared__ double scratch[32];
  wait_for_prerequisite();  // launched as a dependent (cuda_launch.cuh)
  allow_dependent_launch();
  const int64_t t = blockIdx.x;
  const int64_t r = blockIdx.y;
  const int64_t n_kv = p.kv.n_head_kv;
  const int64_t dk = p.kv.head_dim_k;
  const int64_t pos = rope_position(p.rope) + t;
  const int64_t cell = pos % p.kv.capacity;
  if (r >= p.n_head + n_kv) {  // a v row: stored as it is
    const int64_t h = r - p.n_head - n_kv;
    const int64_t dv = p.kv.head_dim_v;
    const float* in = p.v + (t * n_kv + h) * dv;
    for (int64_t i = threadIdx.x; i < dv; i += blockDim.x) {
      store_cell(p.kv, p.kv.v, (cell * n_kv + h) * dv + i, in[i]);
    }
    return;
  }
  const bool is_q = r < p.n_head;
  const int64_t h = is_q ? r : r - p.n_head;
  float* row = is_q ? p.q + (t * p.n_head + h) * dk : p.k + (t * n_kv + h) * dk;
  const float* norm = is_q ? p.q_norm : p.k_norm;
  for (int64_t i = threadIdx.x; i < dk; i += blockDim.x) row_values[i] = row[i];
  // The squares summed as the rms_norm op sums this row (register_norm_kernel for rows of whole
  // 8-element pieces, the strided kernel otherwise), so that the two give the same bits.
  const double local = dk % 8 == 0 ? sum_squares_by_eights(row, dk) : sum_squares(row, dk);
  if (norm != nullptr) {  // the same for every thread of the block
    const float factor = rms_factor(local, dk, p.norm_eps, scratch);
    scale_row(row_values, factor, norm, row_values, dk);  // each thread its own elements
  }
  __syncthreads();
  // Rotated pairs, then the dimensions past n_rot as they are; k also into its cell.
  const int64_t half = p.rope.n_rot / 2;
  const int64_t k_base = (cell * n_kv + h) * dk;
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    float cos_v, sin_v;
    rope_cos_sin(p.rope, pos, i, &cos_v, &sin_v);
    int64_t a, b;
    rope_pair(p.rope, i, &a, &b);
    rope_rotate(row_values[a], row_values[b], cos_v, sin_v, &row[a], &row[b]);
    if (!is_q) {
      store_cell(p.kv, p.kv.k, k_base + a, row[a]);
      store_cell(p.kv, p.kv.k, k_base + b, row[b]);
    }
  }
  for (int64_t i = p.rope.n_rot + threadIdx.x; i < dk; i += blockDim.x) {
    row[i] = row_values[i];
    if (!is_q) store_cell(p.kv, p.kv.k, k_base + i, row_values[i]);
  }
}

}  // namespace

void launch_attention_inputs(const AttentionInputs& in, const int64_t* pos0_slot,
                             const float* cpu_angles, cudaStream_t stream) {
  const KvLayerView& kv = in.kv;
  if (in.n_tokens <= 0) return;
  if (kv.capacity <= 0 || in.pos0 < 0) {
    fail("attention_inputs: capacity ", kv.capacity, ", position ", in.pos0);
  }
  if (kv.head_dim_k <= 0 || kv.head_dim_k > kMaxHeadDim || kv.head_dim_v <= 0 ||
      kv.n_head_kv <= 0 || in.n_head <= 0) {
    fail("attention_inputs: ", in.n_head, "/", kv.n_head_kv, " heads of ", kv.head_dim_k, "/",
         kv.head_dim_v);
  }
  if (in.n_tokens > int64_t(0x7fffffff) || in.n_head + 2 * kv.n_head_kv > 65535) {
    fail("attention_inputs: ", in.n_tokens, " tokens x ", in.n_head, " heads are too many");
  }
  InputsParams p{in.q,
                 in.k,
                 in.v,
                 in.n_head,
                 in.q_norm,
                 in.k_norm,
                 in.norm_eps,
                 kv,
                 rope_constants(in.n_head, kv.head_dim_k, in.pos0, pos0_slot, in.rope, cpu_angles)};
  const dim3 grid(unsigned(in.n_tokens), unsigned(in.n_head + 2 * kv.n_head_kv));
  check(launch_chained(attention_inputs_kernel, grid, dim3(kThreads), 0, stream, p),
        "attention_inputs kernel");
}

}  // namespace sluice::cuda
