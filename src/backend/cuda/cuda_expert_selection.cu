// expert_matmul.h's select_experts: backend/expert_selection.cpp's select_and_weigh_experts on
// the device, one block per token and one thread per expert. The scores, group scores and
// weights take the host's float and double operations one for one (explicit rounding
// intrinsics, no contraction; exp is glibc's expf step for step, cuda_math.cuh), so the choice
// and the weights are the host's bit for bit. The host sorts
// with std::sort; here each expert's place is its rank, the number of experts that beat it,
// under a total order (score, then the lower index): the same list whenever the scores are
// distinct. The softmax scoring is softmax_rows_kernel's, bit for bit (cuda_softmax.cuh).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_softmax.cuh"
#include "backend/cuda/expert_matmul.h"

namespace sluice::cuda {
namespace {

constexpr int kMaxExperts = int(kMaxSelectExperts);
constexpr int kMaxChosen = int(kMaxSelectedExperts);
// Clamp of the weights' sum, the smallest normal half (llama.cpp's guard against a zero sum).
constexpr float kMinWeightSum = 6.103515625e-5f;

// Larger float, larger key; equal floats (-0 and +0 too) give equal keys.
__device__ __forceinline__ uint32_t order_key(float f) {
  if (f == 0.0f) f = 0.0f;
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
// Unique per index: the score first, then the lower index wins a tie.
__device__ __forceinline__ uint64_t rank_key(float value, int index) {
  return (uint64_t(order_key(value)) << 32) | uint64_t(0xffffffffu - uint32_t(index));
}
// How many of keys[0 .. n) beat `key` (its place in a descending sort).
__device__ __forceinline__ int rank_of(uint64_t key, const uint64_t* keys, int n) {
  int rank = 0;
  for (int j = 0; j < n; ++j) rank += keys[j] > key ? 1 : 0;
  return rank;
}

struct SelectionParams {
  int n_expert, k;
  int n_group, n_group_used;  // n_group <= 1: no groups
  bool norm_weights;
  bool scale_weights;
  float weights_scale;
  ExpertScoring scoring;
};

// sigmoid_probability: 1 / (1 + exp(-x)) in float.
__device__ __forceinline__ float sigmoid_like_host(float x) {
  return __fdiv_rn(1.0f, __fadd_rn(1.0f, libm_expf(-x)));
}

// Group-limited routing (mask_groups on the host): a group's score is its two best scores
// summed in double and stored as float; experts outside the n_group_used best groups get -inf.
// Every thread of the block calls it (barriers inside); returns the thread's masked score.
__device__ float mask_groups(const float* scores, float score, const SelectionParams& p) {
  __shared__ uint64_t group_keys[kMaxExperts / 2];
  __shared__ bool group_kept[kMaxExperts / 2];
  const int e = threadIdx.x;
  const int per_group = p.n_expert / p.n_group;
  if (e < p.n_group) {
    float best = -INFINITY, second = -INFINITY;  // the two largest values, as a sort gives them
    for (int i = 0; i < per_group; ++i) {
      const float v = scores[e * per_group + i];
      if (v > best) {
        second = best;
        best = v;
      } else if (v > second) {
        second = v;
      }
    }
    group_keys[e] = rank_key(__double2float_rn(__dadd_rn(double(best), double(second))), e);
  }
  __syncthreads();
  if (e < p.n_group) group_kept[e] = rank_of(group_keys[e], group_keys, p.n_group) < p.n_group_used;
  __syncthreads();
  // Experts past n_group * per_group belong to no group: never masked, as on the host.
  if (e < p.n_group * per_group && !group_kept[e / per_group]) return -INFINITY;
  return score;
}

// weigh_chosen_experts on one thread: w[c] = probs[chosen[c]], their softmax (max by fmax,
// exps summed in double, times the float of 1 / sum) when the scoring asks, then normalised
// (sum in double, clamped, as float) and scaled, in the host's order.
__device__ void weigh_chosen(const float* probs, const int32_t* chosen, const SelectionParams& p,
                             float* w) {
  for (int c = 0; c < p.k; ++c) w[c] = probs[chosen[c]];
  if (p.scoring == ExpertScoring::kSoftmaxChosen) {
    float max = -INFINITY;
    for (int c = 0; c < p.k; ++c) max = fmaxf(max, w[c]);
    double sum = 0.0;
    for (int c = 0; c < p.k; ++c) {
      w[c] = libm_expf(__fsub_rn(w[c], max));
      sum = __dadd_rn(sum, double(w[c]));
    }
    const float inv = __double2float_rn(__ddiv_rn(1.0, sum));
    for (int c = 0; c < p.k; ++c) w[c] = __fmul_rn(w[c], inv);
  }
  if (p.norm_weights) {
    double sum = 0.0;
    for (int c = 0; c < p.k; ++c) sum = __dadd_rn(sum, double(w[c]));
    const float rounded = __double2float_rn(sum);
    const float total = rounded < kMinWeightSum ? kMinWeightSum : rounded;  // std::max's choice
    for (int c = 0; c < p.k; ++c) w[c] = __fdiv_rn(w[c], total);
  }
  if (p.scale_weights) {
    for (int c = 0; c < p.k; ++c) w[c] = __fmul_rn(w[c], p.weights_scale);
  }
}

__global__ void __launch_bounds__(kMaxExperts)
    select_experts_kernel(const float* __restrict__ rows, const float* __restrict__ bias,
                          SelectionParams p, int32_t* __restrict__ selected,
                          float* __restrict__ weights) {
  __shared__ float probs[kMaxExperts];   // [n_expert] the row, or its sigmoid
  __shared__ float scores[kMaxExperts];  // [n_expert] probs + bias
  __shared__ uint64_t keys[kMaxExperts];
  __shared__ int32_t chosen[kMaxChosen];
  __shared__ float chosen_weights[kMaxChosen];
  wait_for_prerequisite();  // launched as a dependent (cuda_launch.cuh)
  allow_dependent_launch();
  const int64_t t = blockIdx.x;
  const float* row = rows + t * p.n_expert;
  const int e = threadIdx.x;
  float score = 0.0f;
  if (p.scoring == ExpertScoring::kSoftmax) {  // the same for every thread of the block
    __shared__ double softmax_scratch[32];
    if (e < p.n_expert) probs[e] = row[e];
    __syncthreads();
    softmax_row_in_block(probs, p.n_expert, softmax_scratch);  // ends with each thread's own
  }
  if (e < p.n_expert) {
    const float prob = p.scoring == ExpertScoring::kSigmoid   ? sigmoid_like_host(row[e])
                       : p.scoring == ExpertScoring::kSoftmax ? probs[e]
                                                              : row[e];
    probs[e] = prob;
    score = __fadd_rn(prob, bias ? bias[e] : 0.0f);
    scores[e] = score;
  }
  if (p.n_group > 1) {
    __syncthreads();
    score = mask_groups(scores, score, p);
  }
  if (e < p.n_expert) keys[e] = rank_key(score, e);
  __syncthreads();
  if (e < p.n_expert) {
    const int rank = rank_of(keys[e], keys, p.n_expert);
    if (rank < p.k) chosen[rank] = e;
  }
  __syncthreads();
  if (e == 0) weigh_chosen(probs, chosen, p, chosen_weights);  // k <= 32: one thread is enough
  __syncthreads();
  if (e < p.k) {
    selected[t * p.k + e] = chosen[e];
    weights[t * p.k + e] = chosen_weights[e];
  }
}

bool fail(std::string* error, const std::string& message) {
  if (error) *error = message;
  return false;
}

}  // namespace

bool select_experts(const float* probs, const float* bias, int64_t n_tokens,
                    const ExpertSelection& config, int32_t* selected, float* weights, void* stream,
                    std::string* error) {
  const int64_t n_expert = config.n_expert, k = config.n_expert_used;
  if (n_expert < 1 || n_expert > kMaxSelectExperts) {
    return fail(error, "cuda select_experts: n_expert " + std::to_string(n_expert) + " (1 to " +
                           std::to_string(kMaxSelectExperts) + " supported)");
  }
  if (k < 1 || k > kMaxSelectedExperts || k > n_expert) {
    return fail(error, "cuda select_experts: n_expert_used " + std::to_string(k) + " (1 to " +
                           std::to_string(kMaxSelectedExperts) + ", at most n_expert)");
  }
  const bool grouped = config.n_group > 1;
  if (grouped && (n_expert / config.n_group < 2 || config.n_group_used < 1 ||
                  config.n_group_used > config.n_group)) {
    return fail(error, "cuda select_experts: " + std::to_string(config.n_group) + " groups, " +
                           std::to_string(config.n_group_used) + " used, of " +
                           std::to_string(n_expert) + " experts");
  }
  if (config.scoring != ExpertScoring::kProbabilities &&
      config.scoring != ExpertScoring::kSigmoid &&
      config.scoring != ExpertScoring::kSoftmaxChosen &&
      config.scoring != ExpertScoring::kSoftmax) {
    return fail(error,
                "cuda select_experts: unknown scoring " + std::to_string(int(config.scoring)));
  }
  if (n_tokens < 0 || n_tokens > INT32_MAX) {
    return fail(error, "cuda select_experts: " + std::to_string(n_tokens) + " tokens");
  }
  if (n_tokens == 0) return true;
  if (!probs || !selected || !weights) {
    return fail(error, "cuda select_experts: probs, selected or weights missing");
  }
  SelectionParams params;
  params.n_expert = int(n_expert);
  params.k = int(k);
  params.n_group = grouped ? int(config.n_group) : 0;
  params.n_group_used = grouped ? int(config.n_group_used) : 0;
  params.norm_weights = config.norm_weights;
  params.scale_weights = config.weights_scale != 0.0f && config.weights_scale != 1.0f;
  params.weights_scale = config.weights_scale;
  params.scoring = config.scoring;
  const int threads = int((n_expert + 31) / 32 * 32);
  const cudaError_t status =
      launch_chained(select_experts_kernel, dim3(unsigned(n_tokens)), dim3(threads), 0,
                     static_cast<cudaStream_t>(stream), probs, bias, params, selected, weights);
  if (status != cudaSuccess) {
    return fail(error, std::string("cuda select_experts: ") + cudaGetErrorString(status));
  }
  return true;
}

}  // namespace sluice::cuda
