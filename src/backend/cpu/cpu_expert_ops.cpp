// CpuBackend's routed-expert ops: the host selection of expert_selection.h, and the experts'
// products — the numbers of the MoE block's per-expert path (a matmul per matrix), whatever
// the grouping.
#include <algorithm>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/row_prefetch.h"
#include "backend/cpu/softmax.h"
#include "core/error.h"
#include "quant/blocks.h"
#include "quant/dot_reference.h"

namespace sluice::cpu {
namespace {

void check_id(const ExpertStack& stack, int32_t id, const char* op) {
  if (id < 0 || id >= stack.count) fail(op, ": expert ", id, " outside the stack of ", stack.count);
}

// Walks the output elements of expert_rows in order — stack s, then choice c, then row r — and
// keeps the weight row's address, with no division per row: three 64-bit divisions per row (and
// three more for the prefetched row) cost as much as a third of a 3-super-block row's product.
class ExpertRowCursor {
 public:
  ExpertRowCursor(const ExpertStack* stacks, size_t n_stacks, const int32_t* ids, int64_t n,
                  int64_t w_row, int64_t i)
      : stacks_(stacks),
        ids_(ids),
        n_stacks_(int64_t(n_stacks)),
        n_(n),
        n_rows_(stacks[0].n_rows),
        w_row_(w_row) {
    const int64_t per_stack = n * n_rows_;
    s_ = i / per_stack;
    element_ = i % per_stack;
    c_ = element_ / n_rows_;
    r_ = element_ % n_rows_;
    aim();
  }
  int64_t stack() const { return s_; }
  int64_t choice() const { return c_; }
  int64_t element() const { return element_; }  // index in stack s's output [n, n_rows]
  const uint8_t* row() const { return row_; }
  void next() {
    ++element_;
    row_ += w_row_;
    if (++r_ < n_rows_) return;
    r_ = 0;
    if (++c_ == n_) c_ = 0, element_ = 0, ++s_;
    aim();
  }

 private:
  // Past the last element there is no row (and the cursor is not read).
  void aim() {
    if (s_ < n_stacks_) {
      row_ = static_cast<const uint8_t*>(stacks_[s_].data) + ids_[c_] * stacks_[s_].stride +
             r_ * w_row_;
    }
  }
  const ExpertStack* stacks_;
  const int32_t* ids_;
  int64_t n_stacks_, n_, n_rows_, w_row_;
  int64_t s_ = 0, c_ = 0, r_ = 0, element_ = 0;
  const uint8_t* row_ = nullptr;
};

}  // namespace

void CpuBackend::select_experts(const float* probs, const float* bias, int64_t n_tokens,
                                const ExpertSelection& s, int32_t* selected, float* weights) {
  // kSoftmax: softmax_rows' numbers (a copy of the row: probs is the caller's), then as
  // probabilities.
  ExpertSelection as_given = s;
  if (s.scoring == ExpertScoring::kSoftmax) as_given.scoring = ExpertScoring::kProbabilities;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* row = probs + t * s.n_expert;
    if (s.scoring == ExpertScoring::kSoftmax) {
      softmax_probs_.assign(row, row + s.n_expert);
      softmax_row(softmax_probs_.data(), s.n_expert);
      row = softmax_probs_.data();
    }
    select_and_weigh_experts(row, bias, as_given, selection_, selected + t * s.n_expert_used,
                             weights + t * s.n_expert_used);
  }
}

void CpuBackend::scale_expert_rows(float* x, const float* scales, int64_t n_expert,
                                   const int32_t* ids, int64_t n, int64_t n_cols) {
  for (int64_t r = 0; r < n; ++r) {
    if (ids[r] < 0 || ids[r] >= n_expert) {
      fail("scale_expert_rows: expert ", ids[r], " outside the table of ", n_expert);
    }
    scale(x + r * n_cols, scales[ids[r]], n_cols);  // scale's multiplications
  }
}

void CpuBackend::add_expert_bias(float* x, const float* table, int64_t n_expert, const int32_t* ids,
                                 int64_t n, int64_t n_cols) {
  for (int64_t r = 0; r < n; ++r) {
    if (ids[r] < 0 || ids[r] >= n_expert) {
      fail("add_expert_bias: expert ", ids[r], " outside the table of ", n_expert);
    }
    add(x + r * n_cols, table + int64_t(ids[r]) * n_cols, n_cols);  // add_bias' additions
  }
}

void CpuBackend::matmul_experts(const ExpertStack& stack, const int32_t* ids, int64_t n,
                                const float* x, bool shared_input, float* y) {
  expert_rows(&stack, &y, 1, ids, n, x, shared_input);
}

void CpuBackend::matmul_experts_shared_input(const ExpertStack* stacks, float* const* ys,
                                             size_t n_stacks, const int32_t* ids, int64_t n,
                                             const float* x) {
  for (size_t i = 1; i < n_stacks; ++i) {
    if (stacks[i].type != stacks[0].type || stacks[i].n_cols != stacks[0].n_cols ||
        stacks[i].n_rows != stacks[0].n_rows) {
      return Backend::matmul_experts_shared_input(stacks, ys, n_stacks, ids, n, x);
    }
  }
  expert_rows(stacks, ys, n_stacks, ids, n, x, true);
}

// One token's choices (a decode step's k experts, of one part or of gate and up): one parallel
// loop over all their output rows instead of a matmul per matrix — one pool wake-up and join
// instead of n, and a shared input quantized once. Each element is the kernel call matmul makes
// for one token (its quantized activations, the scaled kernel where matmul takes it; the tiled
// path starts at 8 tokens), so the numbers are those of a matmul per matrix.
void CpuBackend::expert_rows(const ExpertStack* stacks, float* const* ys, size_t n_stacks,
                             const int32_t* ids, int64_t n, const float* x, bool shared_input) {
  for (size_t s = 0; s < n_stacks; ++s) {
    for (int64_t c = 0; c < n; ++c) check_id(stacks[s], ids[c], "matmul_experts");
  }
  if (n <= 0 || n_stacks == 0) return;
  const QType type = stacks[0].type;
  const auto act_type = activation_type_for(type);
  const VecDotKernel kernel = vec_dot_kernel(type);
  if (!act_type || kernel.fn == nullptr)
    fail("matmul_experts: no dot product for ", qtype_name(type));
  const int64_t n_cols = stacks[0].n_cols, n_rows = stacks[0].n_rows;
  const int64_t act_row = int64_t(*row_bytes(*act_type, uint64_t(n_cols)));
  const int64_t w_row = int64_t(*row_bytes(type, uint64_t(n_cols)));
  const int64_t n_inputs = shared_input ? 1 : n;
  const uint8_t* x_q = quantize_activations(*act_type, x, n_inputs, n_cols);
  const int64_t input_step = shared_input ? 0 : 1;  // activation row of choice c: c * step
  const int n_threads = pool_ != nullptr ? pool_->size() : 1;
  const int64_t total = int64_t(n_stacks) * n * n_rows;
  const int64_t chunk = std::max<int64_t>(1, total / (8 * n_threads));

  // Element i's row asks for element i + ahead's (row_prefetch.h); a chunk's first rows are
  // asked for when it starts. `each(cursor)` computes the cursor's element.
  const int64_t ahead = expert_rows_ahead();
  const auto walk = [&](int64_t lo, int64_t hi, const auto& each) {
    ExpertRowCursor at(stacks, n_stacks, ids, n, w_row, lo);
    ExpertRowCursor next(stacks, n_stacks, ids, n, w_row, lo);
    const int64_t warm_end = std::min(lo + ahead, total);
    for (int64_t i = lo; i < warm_end; ++i, next.next()) prefetch_bytes(next.row(), size_t(w_row));
    for (int64_t i = lo; i < hi; ++i, at.next()) {
      if (ahead > 0 && i + ahead < total) {
        prefetch_bytes(next.row(), size_t(w_row));
        next.next();
      }
      each(at);
    }
  };

  const VecDotScaledFn scaled = vec_dot_scaled_kernel(type);
  if (scaled != nullptr && (*act_type == QType::Q8_1 || *act_type == QType::Q8_0)) {
    const int64_t stride = 2 * (n_cols / kQK8_0);
    const float* scales = activation_block_scales(*act_type, x_q, n_inputs, act_row, n_cols);
    parallel(total, chunk, [&](int64_t lo, int64_t hi) {
      walk(lo, hi, [&](const ExpertRowCursor& at) {
        const int64_t in = at.choice() * input_step;
        scaled(at.row(), x_q + in * act_row, act_row, scales + in * stride, stride, 1,
               ys[at.stack()] + at.element(), n_rows, n_cols);
      });
    });
    return;
  }
  const VecDotFn dot = kernel.fn;
  parallel(total, chunk, [&](int64_t lo, int64_t hi) {
    walk(lo, hi, [&](const ExpertRowCursor& at) {
      ys[at.stack()][at.element()] =
          dot(at.row(), x_q + at.choice() * input_step * act_row, n_cols);
    });
  });
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
