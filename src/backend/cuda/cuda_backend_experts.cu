// CudaBackend's routed-expert ops (cuda_backend.h): the checks and the mirror here, the kernels
// in expert_matmul.h. A stack of host weights (the mapped file's experts) is mirrored whole, once.
// Each op first hands its signature to the step graph (cuda_step_graph.h): replayed, it launches
// nothing; matmul_expert_groups' host lists are an upload, staged like any other.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/expert_matmul.h"
#include "backend/cuda/quant_matmul.h"

namespace sluice::cuda {
namespace {

// The most rows matmul_expert_groups runs row by row (without CPU rounding): a chunk of up to
// kCpuRoundingMaxTokens tokens (quant_matmul.h's short-chunk bound) with 8 experts each. Each row
// reads its expert's whole matrix, so a longer chunk, whose experts get many rows each, keeps
// the grouped tiles.
constexpr int64_t kRowByRowMaxRows = kCpuRoundingMaxTokens * 8;

ExpertStackArgs stack_args(const ExpertStack& stack, const void* base) {
  return {stack.type, base, stack.stride, stack.n_rows, stack.n_cols};
}

void check_stack(const ExpertStack& stack, const char* op) {
  if (stack.data == nullptr || stack.count <= 0 || stack.stride <= 0 || stack.n_rows <= 0 ||
      stack.n_cols <= 0) {
    fail("cuda: ", op, ": empty or malformed expert stack");
  }
}

}  // namespace

void CudaBackend::select_experts(const float* probs, const float* bias, int64_t n_tokens,
                                 const ExpertSelection& s, int32_t* selected, float* weights) {
  OpSignature op(OpKind::kSelectExperts);
  if (graph_.replayed(op.add(probs).add(bias).add(n_tokens).add(s).add(selected).add(weights))) {
    return;
  }
  if (n_tokens <= 0) return;
  const float* device_bias = bias ? mirror_.resolve(bias, uint64_t(s.n_expert)) : nullptr;
  std::string error;
  if (!cuda::select_experts(probs, device_bias, n_tokens, s, selected, weights, stream_.handle(),
                            &error)) {
    fail(error);
  }
}

void CudaBackend::scale_expert_rows(float* x, const float* scales, int64_t n_expert,
                                    const int32_t* ids, int64_t n, int64_t n_cols) {
  OpSignature op(OpKind::kScaleExpertRows);
  if (graph_.replayed(op.add(x).add(scales).add(n_expert).add(ids).add(n).add(n_cols))) return;
  if (n <= 0 || n_cols <= 0) return;
  if (scales == nullptr || n_expert <= 0) fail("cuda: scale_expert_rows: no scales");
  const float* device_scales = mirror_.resolve(scales, uint64_t(n_expert));
  std::string error;
  if (!cuda::scale_expert_rows(x, device_scales, n_expert, ids, n, n_cols, stream_.handle(),
                               &error)) {
    fail(error);
  }
}

void CudaBackend::add_expert_bias(float* x, const float* table, int64_t n_expert,
                                  const int32_t* ids, int64_t n, int64_t n_cols) {
  OpSignature op(OpKind::kAddExpertBias);
  if (graph_.replayed(op.add(x).add(table).add(n_expert).add(ids).add(n).add(n_cols))) return;
  if (n <= 0 || n_cols <= 0) return;
  if (table == nullptr || n_expert <= 0) fail("cuda: add_expert_bias: no bias table");
  const float* device_table = mirror_.resolve(table, uint64_t(n_expert * n_cols));
  std::string error;
  if (!cuda::add_expert_bias(x, device_table, n_expert, ids, n, n_cols, stream_.handle(), &error)) {
    fail(error);
  }
}

void CudaBackend::matmul_experts(const ExpertStack& stack, const int32_t* ids, int64_t n,
                                 const float* x, bool shared_input, float* y) {
  const int64_t rows = shared_input ? 1 : n;
  const void* xq = n > 0 ? prequantized(stack.type, x, rows, stack.n_cols) : nullptr;
  OpSignature op(OpKind::kMatmulExperts);
  op.add(stack).add(ids).add(n).add(x).add(shared_input).add(y).add(xq);
  if (graph_.replayed(op)) return;
  if (n <= 0) return;
  check_stack(stack, "matmul_experts");
  const void* base = mirror_.resolve(stack.data, uint64_t(stack.count * stack.stride));
  std::string error;
  if (!matmul_by_id(stack_args(stack, base), ids, n, x, rows, y, stream_.handle(), &error, xq)) {
    fail(error);
  }
}

void CudaBackend::matmul_expert_groups(const ExpertStack& stack, const int32_t* ids,
                                       const int64_t* offsets, int64_t n_groups, const float* x,
                                       float* y) {
  if (n_groups <= 0) return;
  check_stack(stack, "matmul_expert_groups");
  int64_t max_rows = 0;
  for (int64_t g = 0; g < n_groups; ++g) {
    if (ids[g] < 0 || ids[g] >= stack.count) {
      fail("cuda: matmul_expert_groups: expert ", ids[g], " outside the stack of ", stack.count);
    }
    const int64_t rows = offsets[g + 1] - offsets[g];
    if (rows < 0 || offsets[g] < 0 || offsets[g + 1] > INT32_MAX) {
      fail("cuda: matmul_expert_groups: bad offsets at group ", g);
    }
    max_rows = std::max(max_rows, rows);
  }
  // One int32 list, copied in stream order (see cuda_moe.cu's lists): ids then offsets for the
  // grouped tiles; or, for a short chunk, each row's expert — its rows go one by one through the
  // decode kernels, the CPU's arithmetic, as quant_matmul.cu runs short dense chunks.
  const int64_t n_rows_total = offsets[n_groups];
  const bool by_row = n_rows_total <= kRowByRowMaxRows || cpu_rounding_;
  std::vector<int32_t> lists;
  if (by_row) {
    lists.reserve(size_t(n_rows_total));
    for (int64_t g = 0; g < n_groups; ++g) {
      lists.insert(lists.end(), size_t(offsets[g + 1] - offsets[g]), ids[g]);
    }
  } else {
    lists.assign(ids, ids + n_groups);
    for (int64_t g = 0; g <= n_groups; ++g) lists.push_back(int32_t(offsets[g]));
  }
  // The lists' contents are an upload (staged in a recorded step); their count, max_rows and
  // the row total (the grids, and which kernel) are the op's.
  OpSignature op(OpKind::kMatmulExpertGroups);
  const bool replayed =
      graph_.replayed(op.add(stack).add(n_groups).add(max_rows).add(n_rows_total).add(x).add(y));
  if (max_rows == 0) return;
  const size_t bytes = lists.size() * sizeof(int32_t);
  if (!replayed && expert_lists_.size() < bytes) {
    stream_.synchronize();  // kernels queued earlier may still read the old lists
    expert_lists_.reserve(bytes);
  }
  upload(expert_lists_.data(), lists.data(), bytes);
  if (replayed) return;
  const auto* device_lists = expert_lists_.as<const int32_t>();
  const void* base = mirror_.resolve(stack.data, uint64_t(stack.count * stack.stride));
  std::string error;
  const bool ok =
      by_row ? matmul_by_id(stack_args(stack, base), device_lists, n_rows_total, x, n_rows_total, y,
                            stream_.handle(), &error)
             : matmul_grouped(stack_args(stack, base), device_lists, device_lists + n_groups,
                              n_groups, max_rows, x, y, stream_.handle(), &error);
  if (!ok) fail(error);
}

}  // namespace sluice::cuda
