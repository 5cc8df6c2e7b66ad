// matvec: y = W x for one quantized weight matrix and one activation row, the decode-time
// matmul. Rows are spread over a ThreadPool; each row is one vec_dot call, so the result is
// bit-identical whatever the thread count. Knows nothing of models; the caller quantizes x
// into activation_type_for(type) (quant/quantize.h) beforehand.
#pragma once

#include <cstdint>

#include "backend/cpu/vec_dot.h"
#include "core/thread_pool.h"
#include "quant/qtype.h"

namespace sluice::cpu {

// w:   [n_rows, row_bytes(type, n_cols)] weight rows, back to back
// x_q: [row_bytes(activation_type_for(type), n_cols)] the activation row
// y:   [n_rows] float
// `pool` may be nullptr (single-threaded). Fails when `type` has no dot product or n_cols is
// not a multiple of its block size.
void matvec(QType type, const void* w, const void* x_q, float* y, int64_t n_rows, int64_t n_cols,
            ThreadPool* pool);

// As above with an explicit ISA table (tests compare ISAs). Precondition: isa_supported(isa).
void matvec(QType type, const void* w, const void* x_q, float* y, int64_t n_rows, int64_t n_cols,
            ThreadPool* pool, CpuIsa isa);

}  // namespace sluice::cpu
