// CpuBackend's routed-expert ops: the host selection of expert_selection.h, and one matmul per
// chosen matrix — the numbers of the MoE block's per-expert path, whatever the grouping.
#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace sluice::cpu {
namespace {

void check_id(const ExpertStack& stack, int32_t id, const char* op) {
  if (id < 0 || id >= stack.count) fail(op, ": expert ", id, " outside the stack of ", stack.count);
}

}  // namespace

void CpuBackend::select_experts(const float* probs, const float* bias, int64_t n_tokens,
                                const ExpertSelection& s, int32_t* selected, float* weights) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* row = probs + t * s.n_expert;
    int32_t* chosen = selected + t * s.n_expert_used;
    select_top_experts(row, bias, s, selection_, chosen);
    weigh_chosen_experts(row, chosen, s, false, weights + t * s.n_expert_used);
  }
}

void CpuBackend::matmul_experts(const ExpertStack& stack, const int32_t* ids, int64_t n,
                                const float* x, bool shared_input, float* y) {
  for (int64_t c = 0; c < n; ++c) {
    check_id(stack, ids[c], "matmul_experts");
    matmul(stack.matrix(ids[c]), x + (shared_input ? 0 : c * stack.n_cols), y + c * stack.n_rows,
           1);
  }
}

void CpuBackend::matmul_expert_groups(const ExpertStack& stack, const int32_t* ids,
                                      const int64_t* offsets, int64_t n_groups, const float* x,
                                      float* y) {
  for (int64_t g = 0; g < n_groups; ++g) {
    check_id(stack, ids[g], "matmul_expert_groups");
    const int64_t rows = offsets[g + 1] - offsets[g];
    if (rows < 0) fail("matmul_expert_groups: group ", g, " has ", rows, " rows");
    if (rows == 0) continue;
    matmul(stack.matrix(ids[g]), x + offsets[g] * stack.n_cols, y + offsets[g] * stack.n_rows,
           rows);
  }
}

}  // namespace sluice::cpu
