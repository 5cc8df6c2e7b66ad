// The routed experts on the GPU without host round trips: the selection of each token's experts
// from the router's probabilities or logits, the products over a stack of expert matrices
// addressed by device-side ids — one launch for all choices of a decode step, one for all groups
// of a prefill chunk — and the experts' bias rows by the same ids. Plain C++ (no CUDA headers), the
// style of quant_matmul.h: device pointers, `stream` a cudaStream_t as void*, calls only enqueue
// work; bad input returns false with a one-line *error before any device work, never a crash. Knows
// no model.
#pragma once

#include <cstdint>
#include <string>

#include "backend/expert_selection.h"
#include "quant/qtype.h"

namespace sluice::cuda {

// Same-shaped matrices one after another, all device memory: matrix i at base + i * stride
// bytes, each [n_rows, n_cols] in GGUF row layout (row_bytes(type, n_cols) per row).
struct ExpertStackArgs {
  QType type;
  const void* base;
  int64_t stride;  // bytes, at least n_rows * row_bytes
  int64_t n_rows, n_cols;
};

// True when matmul_by_id / matmul_grouped have kernels for `type` (every quant_matmul_supported
// type).
bool expert_matmul_supported(QType type);

// Decode: y[c, :] = W_{ids[c]} . x_c for c < n (any n; launches of up to 65535). ids: device int32
// [n] (ids < the stack's count are the caller's business). x: device float [n_inputs, n_cols],
// n_inputs 1 (every choice reads row 0: gate / up) or n (choice c reads row c: down). y: device [n,
// n_rows]. Bit-equal, row for row, to quant_matmul.h's matmul of W_{ids[c]} on x_c alone (1 token):
// the same activation quantization and int8 matvec, or the same float matvec, in one launch over
// the choices (after one quantization launch of the n_inputs rows for the quantized types).
// xq: x's n_inputs rows already quantized in the stack type's activation format (quant_matmul.h,
// quantize_activations' layout; at most 8 rows, n at most 65535), or nullptr: then no
// quantization launch.
bool matmul_by_id(const ExpertStackArgs& s, const int32_t* ids, int64_t n, const float* x,
                  int64_t n_inputs, float* y, void* stream, std::string* error,
                  const void* xq = nullptr);

// Prefill: for g < n_groups, rows offsets[g] .. offsets[g + 1] of x [offsets[n_groups], n_cols]
// times W_{ids[g]} into the same rows of y [offsets[n_groups], n_rows]. ids [n_groups], offsets
// [n_groups + 1]: device int32, offsets non-decreasing. max_rows: the largest group's row count
// (host value; it sizes the grid). One launch of matmul's tensor-core tile kernel for every group
// whatever its size: within the prefill tolerance (f16 operands) of the exact products. (matmul
// itself runs a group of <= 32 rows as decode launches and a longer one through cuBLAS when it
// can; CudaBackend::matmul_expert_groups sends chunks of <= 256 rows to matmul_by_id.)
bool matmul_grouped(const ExpertStackArgs& s, const int32_t* ids, const int32_t* offsets,
                    int64_t n_groups, int64_t max_rows, const float* x, float* y, void* stream,
                    std::string* error);

// The most experts select_experts handles (one thread per expert in a block) and the most it
// selects per token.
constexpr int64_t kMaxSelectExperts = 1024;
constexpr int64_t kMaxSelectedExperts = 32;

// For t < n_tokens: from rows[t, :n_expert] (device) plus bias[:n_expert] (device, or nullptr)
// the experts select_and_weigh_experts picks into selected[t, :k] (device int32, best first) and
// their weights into weights[t, :k] (device float), k = config.n_expert_used, the rows being
// probabilities or logits as config.scoring says (backend/expert_selection.h). The same float
// and double operations as the host, so bit-equal whenever the scores are distinct — but where
// the scoring takes an exp (sigmoid, softmax of the chosen): libm's expf there, exp in double
// rounded to float here, which may differ by one ulp (so may the weights by a few). Equal scores
// are ranked by the lower expert index (groups by the lower group index), where the host's
// std::sort may order them either way. One block per token.
bool select_experts(const float* probs, const float* bias, int64_t n_tokens,
                    const ExpertSelection& config, int32_t* selected, float* weights, void* stream,
                    std::string* error);

// x[r, :] += table[ids[r], :] for r < n, x [n, n_cols] (device), ids [n] (device int32), table
// [n_expert, n_cols] (device): one float addition per element, add_bias' own, so bit-equal to it.
// A row whose id lies outside [0, n_expert) is left as it is (the host checks lists it makes).
bool add_expert_bias(float* x, const float* table, int64_t n_expert, const int32_t* ids, int64_t n,
                     int64_t n_cols, void* stream, std::string* error);
// x[r, :] *= scales[ids[r]] for r < n (device memory, scales [n_expert]): one float
// multiplication per element, scale's own, so bit-equal to it. Rows with an id outside
// [0, n_expert) are left as they are.
bool scale_expert_rows(float* x, const float* scales, int64_t n_expert, const int32_t* ids,
                       int64_t n, int64_t n_cols, void* stream, std::string* error);

}  // namespace sluice::cuda
