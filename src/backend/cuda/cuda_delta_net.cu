// CudaBackend's recurrent-layer ops (backend.h: causal_conv_silu, l2_norm_heads, delta_gates,
// delta_rule) and their kernels. Element-wise steps keep CpuBackend's float
// operations (explicit rounding intrinsics, libm functions through double, cuda_math.cuh); the
// sums that CpuBackend takes left to right (the delta rule's dot products, the L2 norms' double
// sums) are warp reductions here, so those agree within rounding, not bit for bit. The delta
// rule gives each row j of a value head's state to one warp, the row held in registers across
// the tokens (one launch per run of tokens; decode reads and writes each state once).
#include <algorithm>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_math.cuh"

namespace sluice::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxConvKernel = 64;
constexpr int kRuleWarps = 8;                // rows of one value head per block
constexpr int64_t kMaxRuleHeadDim = 8 * 32;  // a row in at most 8 registers per lane

__device__ __forceinline__ float libm_logf(float x) {
  return __double2float_rn(log(double(x)));
}
__device__ __forceinline__ float sigmoid(float x) {
  return __fdiv_rn(1.0f, __fadd_rn(1.0f, libm_expf(-x)));
}

// One thread per channel, tokens in order; w holds the last `kernel` inputs. The SiLU is glu's
// (cpu::swiglu_rows): the polynomial exp on the row's whole groups of eight (c < n_vector).
__global__ void causal_conv_silu_kernel(float* x, int64_t n_tokens, int64_t channels,
                                        const float* taps, int kernel, float* state,
                                        int64_t n_vector) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  float w[kMaxConvKernel];
  for (int j = 0; j + 1 < kernel; ++j) w[j] = state[j * channels + c];
  const float* tap = taps + c * kernel;
  for (int64_t t = 0; t < n_tokens; ++t) {
    w[kernel - 1] = x[t * channels + c];
    float sum = 0.0f;
    for (int j = 0; j < kernel; ++j) sum = __fadd_rn(sum, __fmul_rn(w[j], tap[j]));
    const float e = c < n_vector ? exp_polynomial(__fsub_rn(0.0f, sum)) : libm_expf(-sum);
    x[t * channels + c] = __fmul_rn(__fdiv_rn(sum, __fadd_rn(1.0f, e)), 1.0f);
    for (int j = 0; j + 1 < kernel; ++j) w[j] = w[j + 1];
  }
  for (int j = 0; j + 1 < kernel; ++j) state[j * channels + c] = w[j];
}

// One warp per (token, head).
__global__ void l2_norm_heads_kernel(float* x, int64_t n_tokens, int64_t row_stride,
                                     int64_t n_heads, int64_t head_dim, float eps,
                                     bool eps_inside) {
  const int64_t head = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (head >= n_tokens * n_heads) return;
  float* v = x + (head / n_heads) * row_stride + (head % n_heads) * head_dim;
  double local = 0.0;
  for (int64_t i = lane; i < head_dim; i += 32) local += double(__fmul_rn(v[i], v[i]));
  const float sum = __double2float_rn(warp_sum(local));
  const float scale = eps_inside ? __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(sum, eps)))
                                 : __fdiv_rn(1.0f, fmaxf(__fsqrt_rn(sum), eps));
  for (int64_t i = lane; i < head_dim; i += 32) v[i] = __fmul_rn(v[i], scale);
}

__global__ void delta_gates_kernel(float* beta, int64_t n_beta_total, float* gate, int64_t n_gate,
                                   int64_t n_gate_total, const float* dt_bias, const float* a,
                                   int64_t a_group) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n_beta_total + n_gate_total;
       i += int64_t(gridDim.x) * blockDim.x) {
    if (i < n_beta_total) {
      beta[i] = sigmoid(beta[i]);
      continue;
    }
    const int64_t g = i - n_beta_total, c = g % n_gate;
    const float x = __fadd_rn(gate[g], dt_bias[c]);
    const float softplus = x > 20.0f ? x : libm_logf(__fadd_rn(1.0f, libm_expf(x)));
    gate[g] = __fmul_rn(softplus, a[c / a_group]);
  }
}

// Block (h, row group): warp w owns state row j = blockIdx.y * kRuleWarps + w of value head h,
// lane l its columns l, l + 32, … (kRegs of them).
template <int kRegs>
__global__ void delta_rule_kernel(DeltaRuleCall c) {
  const int64_t d = c.head_dim, nv = c.n_v_heads, h = blockIdx.x;
  const int64_t j = int64_t(blockIdx.y) * kRuleWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (j >= d) return;  // the whole warp
  const int64_t per_key = nv / c.n_k_heads;
  const int64_t kh = c.grouped ? h / per_key : h % c.n_k_heads;
  float* row = c.state + (h * d + j) * d;
  float m[kRegs];
#pragma unroll
  for (int r = 0; r < kRegs; ++r) {
    const int64_t i = lane + 32 * r;
    m[r] = i < d ? row[i] : 0.0f;
  }
  for (int64_t t = 0; t < c.n_tokens; ++t) {
    const float* q = c.q + t * c.qk_stride + kh * d;
    const float* k = c.k + t * c.qk_stride + kh * d;
    const float head_decay = c.key_gate ? 1.0f : libm_expf(c.gate[t * nv + h]);
    const float* key_gate = c.gate + (t * nv + h) * d;
    float kd = 0.0f;
#pragma unroll
    for (int r = 0; r < kRegs; ++r) {
      const int64_t i = lane + 32 * r;
      if (i < d) {
        m[r] = __fmul_rn(m[r], c.key_gate ? libm_expf(key_gate[i]) : head_decay);
        kd = __fadd_rn(kd, __fmul_rn(m[r], k[i]));
      }
    }
    kd = warp_sum(kd);
    const float delta =
        __fmul_rn(__fsub_rn(c.v[t * c.v_stride + h * d + j], kd), c.beta[t * nv + h]);
    float qd = 0.0f;
#pragma unroll
    for (int r = 0; r < kRegs; ++r) {
      const int64_t i = lane + 32 * r;
      if (i < d) {
        m[r] = __fadd_rn(m[r], __fmul_rn(k[i], delta));
        qd = __fadd_rn(qd, __fmul_rn(m[r], q[i]));
      }
    }
    qd = warp_sum(qd);
    if (lane == 0) c.out[t * c.out_stride + h * d + j] = __fmul_rn(qd, c.scale);
  }
#pragma unroll
  for (int r = 0; r < kRegs; ++r) {
    const int64_t i = lane + 32 * r;
    if (i < d) row[i] = m[r];
  }
}

uint64_t count_or_zero(int64_t n) {
  return n > 0 ? uint64_t(n) : 0;
}

}  // namespace

void CudaBackend::causal_conv_silu(float* x, int64_t n_tokens, int64_t channels, const float* taps,
                                   int64_t kernel, float* conv_state) {
  OpSignature op(OpKind::kCausalConvSilu);
  if (graph_.replayed(
          op.add(x).add(n_tokens).add(channels).add(taps).add(kernel).add(conv_state))) {
    return;
  }
  if (kernel < 1 || kernel > kMaxConvKernel) {
    fail("cuda: causal_conv_silu: kernel ", kernel, " is outside 1..", kMaxConvKernel);
  }
  if (n_tokens <= 0 || channels <= 0) return;
  const float* device_taps = mirror_.resolve(taps, count_or_zero(channels * kernel));
  causal_conv_silu_kernel<<<grid_for(channels, kThreads), kThreads, 0,
                            as_stream(stream_.handle())>>>(
      x, n_tokens, channels, device_taps, int(kernel), conv_state, channels & ~int64_t(7));
  check_launch("causal_conv_silu kernel");
}

void CudaBackend::l2_norm_heads(float* x, int64_t n_tokens, int64_t row_stride, int64_t n_heads,
                                int64_t head_dim, float eps, bool eps_inside) {
  OpSignature op(OpKind::kL2NormHeads);
  op.add(x).add(n_tokens).add(row_stride).add(n_heads).add(head_dim);
  if (graph_.replayed(op.add(eps).add(eps_inside))) return;
  const int64_t n_heads_total = n_tokens * n_heads;
  if (n_heads_total <= 0 || head_dim <= 0) return;
  l2_norm_heads_kernel<<<grid_for(n_heads_total * 32, kThreads), kThreads, 0,
                         as_stream(stream_.handle())>>>(x, n_tokens, row_stride, n_heads, head_dim,
                                                        eps, eps_inside);
  check_launch("l2_norm_heads kernel");
}

void CudaBackend::delta_gates(float* beta, int64_t n_beta, float* gate, int64_t n_gate,
                              int64_t n_tokens, const float* dt_bias, const float* a,
                              int64_t a_group) {
  OpSignature op(OpKind::kDeltaGates);
  op.add(beta).add(n_beta).add(gate).add(n_gate).add(n_tokens).add(dt_bias).add(a);
  if (graph_.replayed(op.add(a_group))) return;
  if (a_group < 1) fail("cuda: delta_gates: a_group ", a_group, " must be at least 1");
  const int64_t n_beta_total = std::max<int64_t>(n_tokens * n_beta, 0);
  const int64_t n_gate_total = std::max<int64_t>(n_tokens * n_gate, 0);
  if (n_beta_total + n_gate_total == 0) return;
  const float* device_bias = mirror_.resolve(dt_bias, count_or_zero(n_gate));
  const float* device_a = mirror_.resolve(a, count_or_zero((n_gate + a_group - 1) / a_group));
  delta_gates_kernel<<<grid_for(n_beta_total + n_gate_total, kThreads), kThreads, 0,
                       as_stream(stream_.handle())>>>(beta, n_beta_total, gate, n_gate,
                                                      n_gate_total, device_bias, device_a, a_group);
  check_launch("delta_gates kernel");
}

void CudaBackend::delta_rule(const DeltaRuleCall& c) {
  OpSignature op(OpKind::kDeltaRule);
  op.add(c.q).add(c.k).add(c.v).add(c.qk_stride).add(c.v_stride).add(c.beta).add(c.gate);
  op.add(c.key_gate).add(c.state).add(c.out).add(c.out_stride).add(c.n_tokens);
  op.add(c.n_k_heads).add(c.n_v_heads).add(c.head_dim).add(c.grouped).add(c.scale);
  if (graph_.replayed(op)) return;
  const int64_t d = c.head_dim;
  if (d < 1 || d > kMaxRuleHeadDim) {
    fail("cuda: delta_rule: head_dim ", d, " is outside 1..", kMaxRuleHeadDim);
  }
  if (c.n_k_heads < 1 || c.n_v_heads % c.n_k_heads != 0) {
    fail("cuda: delta_rule: ", c.n_v_heads, " value heads cannot share ", c.n_k_heads,
         " key heads");
  }
  if (c.n_tokens <= 0 || c.n_v_heads <= 0) return;
  const dim3 grid(unsigned(c.n_v_heads), unsigned((d + kRuleWarps - 1) / kRuleWarps));
  const cudaStream_t stream = as_stream(stream_.handle());
  const int64_t regs = (d + 31) / 32;
  if (regs <= 1) {
    delta_rule_kernel<1><<<grid, kRuleWarps * 32, 0, stream>>>(c);
  } else if (regs <= 2) {
    delta_rule_kernel<2><<<grid, kRuleWarps * 32, 0, stream>>>(c);
  } else if (regs <= 4) {
    delta_rule_kernel<4><<<grid, kRuleWarps * 32, 0, stream>>>(c);
  } else {
    delta_rule_kernel<8><<<grid, kRuleWarps * 32, 0, stream>>>(c);
  }
  check_launch("delta_rule kernel");
}

}  // namespace sluice::cuda
