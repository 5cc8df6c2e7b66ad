// CudaBackend's gates and broadcast products (backend.h: mul_gate, mul_rows): the step graph's
// check, the weight row through the mirror, then cuda_gate.cu's launchers.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_gate.h"

namespace sluice::cuda {

void CudaBackend::mul_gate(GateActivation act, float* x, float* gate, int64_t n_rows,
                           int64_t n_cols, int64_t n_gate) {
  OpSignature op(OpKind::kMulGate);
  if (graph_.replayed(op.add(uint64_t(act)).add(x).add(gate).add(n_rows).add(n_cols).add(n_gate))) {
    return;
  }
  launch_mul_gate(act, x, gate, n_rows, n_cols, n_gate, as_stream(stream_.handle()));
}

void CudaBackend::mul_rows(float* x, const float* weight, int64_t n_rows, int64_t n_cols) {
  OpSignature op(OpKind::kMulRows);
  if (graph_.replayed(op.add(x).add(weight).add(n_rows).add(n_cols))) return;
  launch_mul_rows(x, mirror_.resolve(weight, n_cols > 0 ? uint64_t(n_cols) : 0), n_rows, n_cols,
                  as_stream(stream_.handle()));
}

}  // namespace sluice::cuda
