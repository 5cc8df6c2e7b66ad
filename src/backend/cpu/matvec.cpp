// matvec's validation and row split. Chunks are whole rows, sized so every thread gets a few
// (late threads can steal from early ones) without a chunk costing more than its handout.
#include "backend/cpu/matvec.h"

#include "core/error.h"

namespace sluice::cpu {

void matvec(QType type, const void* w, const void* x_q, float* y, int64_t n_rows, int64_t n_cols,
            ThreadPool* pool) {
  matvec(type, w, x_q, y, n_rows, n_cols, pool, best_isa());
}

void matvec(QType type, const void* w, const void* x_q, float* y, int64_t n_rows, int64_t n_cols,
            ThreadPool* pool, CpuIsa isa) {
  const VecDotKernel kernel = vec_dot_kernel(type, isa);
  if (kernel.fn == nullptr) fail("matvec: no dot product for weight type ", qtype_name(type));
  const auto row_size = row_bytes(type, uint64_t(n_cols < 0 ? 0 : n_cols));
  if (n_cols < 0 || n_rows < 0 || !row_size) {
    fail("matvec: ", n_rows, " x ", n_cols, " is not a valid ", qtype_name(type),
         " matrix (columns must be a multiple of ", traits_of(type).block_size, ")");
  }
  const auto* rows = static_cast<const uint8_t*>(w);
  const VecDotFn dot = kernel.fn;
  const int64_t stride = int64_t(*row_size);
  auto body = [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) y[r] = dot(rows + r * stride, x_q, n_cols);
  };
  const int n_threads = pool != nullptr ? pool->size() : 1;
  if (n_threads == 1) {
    body(0, n_rows);
    return;
  }
  int64_t chunk = n_rows / (4 * n_threads);
  if (chunk < 1) chunk = 1;
  pool->parallel_for(0, n_rows, chunk, body);
}

}  // namespace sluice::cpu
