// DeepSeek V4's own steps on the device — CudaBackend's hyper_mix, hyper_fold, hyper_expand,
// clamp_swiglu, kv_compress and gather_key_cells, with their kernels. Each follows CpuBackend's
// float steps in the same order (products and sums rounded by __fmul_rn / __fadd_rn, never
// fused; sums in double where the CPU sums in double), so:
//   - hyper_fold, hyper_expand, clamp_swiglu, gather_key_cells: bit-equal to the CPU;
//   - hyper_mix, kv_compress: the same but for expf / sigmoid's exp, which may differ from the
//     host's std::exp in the last bit (a few ulp after the Sinkhorn rounds and the softmaxes).
// hyper_mix runs a thread per token: its matrices are n_stream × n_stream (4 in DeepSeek V4), a
// handful of floats, and the Sinkhorn rounds are sequential.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_math.cuh"
#include "backend/cuda/cuda_step_graph.h"
#include "core/error.h"

namespace sluice::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMixThreads = 64;

uint64_t count_or_zero(int64_t n) {
  return n > 0 ? uint64_t(n) : 0;
}

__device__ __forceinline__ float sigmoid_rn(float x) {
  return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x)));
}

// A row of n at stride `step` through its softmax: exp(x - max), the sum in double, times
// float(1 / sum).
__device__ void softmax_strided(float* x, int64_t n, int64_t step) {
  float max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max = fmaxf(max, x[i * step]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i * step] = expf(__fsub_rn(x[i * step], max));
    sum += double(x[i * step]);
  }
  const float inv = __double2float_rn(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i * step] = __fmul_rn(x[i * step], inv);
}

// x[i * step] /= (Σ_i x[i * step] in double, as float) + eps, for i < n.
__device__ void normalise_strided(float* x, int64_t n, int64_t step, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += double(x[i * step]);
  const float total = __fadd_rn(__double2float_rn(sum), eps);
  for (int64_t i = 0; i < n; ++i) x[i * step] = __fdiv_rn(x[i * step], total);
}

// One thread per token; comb is worked on in place in the output (src rows, dst fastest).
__global__ void hyper_mix_kernel(const float* mixes, const float* scale, const float* base,
                                 int64_t n_tokens, int64_t hc, int64_t iterations, float eps,
                                 float* pre, float* post, float* comb) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= n_tokens) return;
  const bool head = post == nullptr;
  const float* m = mixes + t * (head ? hc : (2 + hc) * hc);
  for (int64_t h = 0; h < hc; ++h) {
    pre[t * hc + h] = __fadd_rn(sigmoid_rn(__fadd_rn(__fmul_rn(m[h], scale[0]), base[h])), eps);
  }
  if (head) return;
  for (int64_t h = 0; h < hc; ++h) {
    const float logit = __fadd_rn(__fmul_rn(m[hc + h], scale[1]), base[hc + h]);
    post[t * hc + h] = __fmul_rn(sigmoid_rn(logit), 2.0f);
  }
  float* c = comb + t * hc * hc;
  for (int64_t i = 0; i < hc * hc; ++i) {
    c[i] = __fadd_rn(__fmul_rn(m[2 * hc + i], scale[2]), base[2 * hc + i]);
  }
  for (int64_t src = 0; src < hc; ++src) softmax_strided(c + src * hc, hc, 1);
  for (int64_t i = 0; i < hc * hc; ++i) c[i] = __fadd_rn(c[i], eps);
  for (int64_t dst = 0; dst < hc; ++dst) normalise_strided(c + dst, hc, hc, eps);
  for (int64_t round = 1; round < iterations; ++round) {
    for (int64_t src = 0; src < hc; ++src) normalise_strided(c + src * hc, hc, 1, eps);
    for (int64_t dst = 0; dst < hc; ++dst) normalise_strided(c + dst, hc, hc, eps);
  }
}

__global__ void hyper_fold_kernel(const float* streams, const float* weights, int64_t n_tokens,
                                  int64_t hc, int64_t d, float* x) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n_tokens * d;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = e / d, i = e % d;
    const float* in = streams + t * hc * d + i;
    const float* w = weights + t * hc;
    float out = __fmul_rn(in[0], w[0]);
    for (int64_t h = 1; h < hc; ++h) out = __fadd_rn(out, __fmul_rn(in[h * d], w[h]));
    x[e] = out;
  }
}

__global__ void hyper_expand_kernel(const float* branch, const float* post, const float* comb,
                                    const float* streams, int64_t n_tokens, int64_t hc, int64_t d,
                                    float* out) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n_tokens * hc * d;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e % d, dst = (e / d) % hc, t = e / (d * hc);
    const float* c = comb + t * hc * hc;
    const float* in = streams + t * hc * d + i;
    float o = __fmul_rn(branch[t * d + i], post[t * hc + dst]);
    for (int64_t src = 0; src < hc; ++src)
      o = __fadd_rn(o, __fmul_rn(in[src * d], c[src * hc + dst]));
    out[e] = o;
  }
}

__global__ void clamp_swiglu_kernel(float* gate, float* up, int64_t n, float limit) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    gate[i] = fminf(gate[i], limit);
    const float u = up[i];
    up[i] = u < -limit ? -limit : (limit < u ? limit : u);
  }
}

// The compressor's geometry and inputs (backend.h's kv_compress).
struct Compress {
  const float* kv;
  const float* score;
  const float* ape;
  float* state;
  int64_t n_tokens, pos0, r, d, width, span;
  bool overlap;
};

// Channel ch of position p's row: its candidate, or its score + ape.
__device__ __forceinline__ float row_element(const Compress& c, int64_t p, int64_t ch,
                                             bool is_score) {
  if (p < c.pos0) return c.state[(p % c.span) * 2 * c.width + (is_score ? c.width : 0) + ch];
  const int64_t t = p - c.pos0;
  if (!is_score) return c.kv[t * c.width + ch];
  return __fadd_rn(c.score[t * c.width + ch], c.ape[(p % c.r) * c.width + ch]);
}

// One thread per (block, channel): the entries' softmax and weighted sum, entries in order.
__global__ void compress_keys_kernel(Compress c, int64_t first, int64_t n_blocks, float* keys) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n_blocks * c.d;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t block = first + e / c.d, ch = e % c.d;
    const int64_t n_entries = c.overlap ? 2 * c.r : c.r;
    // (value, score) of entry k.
    const auto entry = [&](int64_t k, float* value, float* score) {
      if (c.overlap && k < c.r) {
        if (block == 0) {
          *value = 0.0f;
          *score = -INFINITY;
        } else {
          *value = row_element(c, (block - 1) * c.r + k, ch, false);
          *score = row_element(c, (block - 1) * c.r + k, ch, true);
        }
        return;
      }
      const int64_t j = c.overlap ? k - c.r : k, offset = c.overlap ? c.d : 0;
      *value = row_element(c, block * c.r + j, offset + ch, false);
      *score = row_element(c, block * c.r + j, offset + ch, true);
    };
    float value = 0.0f, score = 0.0f, max = -INFINITY;
    for (int64_t k = 0; k < n_entries; ++k) {
      entry(k, &value, &score);
      max = fmaxf(max, score);
    }
    double total = 0.0;
    for (int64_t k = 0; k < n_entries; ++k) {
      entry(k, &value, &score);
      total += double(expf(__fsub_rn(score, max)));
    }
    const float inv = __double2float_rn(1.0 / total);
    double sum = 0.0;
    for (int64_t k = 0; k < n_entries; ++k) {
      entry(k, &value, &score);
      const float weight = __fmul_rn(expf(__fsub_rn(score, max)), inv);
      sum += double(__fmul_rn(value, weight));
    }
    keys[e] = __double2float_rn(sum);
  }
}

// The run's last rows (positions from `from`) into the ring.
__global__ void compress_state_kernel(Compress c, int64_t from, int64_t n_rows) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n_rows * 2 * c.width;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t p = from + e / (2 * c.width), ch = e % (2 * c.width);
    const bool is_score = ch >= c.width;
    c.state[(p % c.span) * 2 * c.width + ch] =
        row_element(c, p, is_score ? ch - c.width : ch, is_score);
  }
}

// Cells in 16-bit units (a cell's bytes are even).
__global__ void gather_key_cells_kernel(const uint16_t* k, const int32_t* cells, int64_t n,
                                        int64_t capacity, int64_t cell, uint16_t* dst) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n * cell;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e / cell;
    const int64_t from = (int64_t(cells[i]) % capacity + capacity) % capacity;
    dst[e] = k[from * cell + e % cell];
  }
}

}  // namespace

void CudaBackend::hyper_mix(const float* mixes, const float* scale, const float* base,
                            int64_t n_tokens, int64_t n_stream, int64_t iterations, float eps,
                            float* pre, float* post, float* comb) {
  OpSignature op(OpKind::kHyperMix);
  op.add(mixes).add(scale).add(base).add(n_tokens).add(n_stream).add(iterations).add(eps);
  if (graph_.replayed(op.add(pre).add(post).add(comb))) return;
  const bool head = post == nullptr;
  if (n_stream <= 0 || head != (comb == nullptr)) {
    fail("cuda: hyper_mix: ", n_stream, " streams", head ? ", comb without post" : "");
  }
  if (n_tokens <= 0) return;
  const int64_t width = head ? n_stream : (2 + n_stream) * n_stream;
  const float* s = mirror_.resolve(scale, head ? 1 : 3);
  const float* b = mirror_.resolve(base, count_or_zero(width));
  hyper_mix_kernel<<<grid_for(n_tokens, kMixThreads), kMixThreads, 0,
                     as_stream(stream_.handle())>>>(mixes, s, b, n_tokens, n_stream, iterations,
                                                    eps, pre, post, comb);
  check_launch("hyper_mix kernel");
}

void CudaBackend::hyper_fold(const float* streams, const float* weights, int64_t n_tokens,
                             int64_t n_stream, int64_t n_embd, float* x) {
  OpSignature op(OpKind::kHyperFold);
  op.add(streams).add(weights).add(n_tokens).add(n_stream).add(n_embd).add(x);
  if (graph_.replayed(op)) return;
  if (n_stream <= 0) fail("cuda: hyper_fold: ", n_stream, " streams");
  if (n_tokens <= 0 || n_embd <= 0) return;
  hyper_fold_kernel<<<grid_for(n_tokens * n_embd, kThreads), kThreads, 0,
                      as_stream(stream_.handle())>>>(streams, weights, n_tokens, n_stream, n_embd,
                                                     x);
  check_launch("hyper_fold kernel");
}

void CudaBackend::hyper_expand(const float* branch, const float* post, const float* comb,
                               const float* streams, int64_t n_tokens, int64_t n_stream,
                               int64_t n_embd, float* out) {
  OpSignature op(OpKind::kHyperExpand);
  op.add(branch).add(post).add(comb).add(streams).add(n_tokens).add(n_stream).add(n_embd);
  if (graph_.replayed(op.add(out))) return;
  if (n_tokens <= 0 || n_stream <= 0 || n_embd <= 0) return;
  hyper_expand_kernel<<<grid_for(n_tokens * n_stream * n_embd, kThreads), kThreads, 0,
                        as_stream(stream_.handle())>>>(branch, post, comb, streams, n_tokens,
                                                       n_stream, n_embd, out);
  check_launch("hyper_expand kernel");
}

void CudaBackend::clamp_swiglu(float* gate, float* up, int64_t n, float limit) {
  if (graph_.replayed(OpSignature(OpKind::kClampSwiglu).add(gate).add(up).add(n).add(limit))) {
    return;
  }
  if (n <= 0) return;
  clamp_swiglu_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream_.handle())>>>(
      gate, up, n, limit);
  check_launch("clamp_swiglu kernel");
}

void CudaBackend::kv_compress(const float* kv, const float* score, const float* ape, float* state,
                              int64_t n_tokens, int64_t pos0, int64_t ratio, int64_t head_dim,
                              bool overlap, float* keys) {
  OpSignature op(OpKind::kKvCompress);
  op.add(kv).add(score).add(ape).add(state).add(n_tokens).add(pos0).add(ratio).add(head_dim);
  if (graph_.replayed(op.add(overlap).add(keys))) return;
  if (ratio <= 0 || head_dim <= 0 || pos0 < 0) {
    fail("cuda: kv_compress: ratio ", ratio, ", head_dim ", head_dim, ", position ", pos0);
  }
  if (n_tokens <= 0) return;
  Compress c{kv, score, nullptr, state, n_tokens, pos0, ratio, head_dim, 0, 0, overlap};
  c.width = (overlap ? 2 : 1) * head_dim;
  c.span = (overlap ? 2 : 1) * ratio;
  c.ape = mirror_.resolve(ape, count_or_zero(ratio * c.width));
  const cudaStream_t stream = as_stream(stream_.handle());
  const int64_t first = pos0 / ratio, n_blocks = (pos0 + n_tokens) / ratio - first;
  if (n_blocks > 0) {
    compress_keys_kernel<<<grid_for(n_blocks * head_dim, kThreads), kThreads, 0, stream>>>(
        c, first, n_blocks, keys);
    check_launch("kv_compress keys kernel");
  }
  // After the keys (same stream): they may read ring rows these overwrite.
  const int64_t from = std::max(pos0, pos0 + n_tokens - c.span);
  const int64_t n_rows = pos0 + n_tokens - from;
  compress_state_kernel<<<grid_for(n_rows * 2 * c.width, kThreads), kThreads, 0, stream>>>(c, from,
                                                                                           n_rows);
  check_launch("kv_compress state kernel");
}

void CudaBackend::gather_key_cells(const KvLayerView& kv, const int32_t* cells, int64_t n,
                                   void* dst) {
  OpSignature op(OpKind::kGatherKeyCells);
  if (graph_.replayed(op.add(kv).add(cells).add(n).add(dst))) return;
  if (kv.capacity <= 0) fail("cuda: gather_key_cells: capacity ", kv.capacity);
  if (n <= 0) return;
  const int64_t cell = kv.n_head_kv * kv.head_dim_k * (kv.type == KvElement::kF16 ? 1 : 2);
  gather_key_cells_kernel<<<grid_for(n * cell, kThreads), kThreads, 0,
                            as_stream(stream_.handle())>>>(
      static_cast<const uint16_t*>(kv.k), cells, n, kv.capacity, cell, static_cast<uint16_t*>(dst));
  check_launch("gather_key_cells kernel");
}

}  // namespace sluice::cuda
