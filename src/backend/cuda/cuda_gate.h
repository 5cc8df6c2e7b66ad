// Internal to backend/cuda (CUDA types): the launchers of cuda_gate.cu — an attention output
// gate and a row multiplied by a weight vector, CpuBackend's float steps (cpu_gate_ops.cpp).
// Each validates what its kernel assumes, enqueues on `stream` and returns without waiting; all
// pointers are device pointers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/backend.h"

namespace sluice::cuda {

// Backend::mul_gate: gate [n_rows, n_gate] = act(gate), x [n_rows, n_cols] *= its logit's value.
void launch_mul_gate(GateActivation act, float* x, float* gate, int64_t n_rows, int64_t n_cols,
                     int64_t n_gate, cudaStream_t stream);
// Backend::mul_rows: x [n_rows, n_cols] *= weight [n_cols] row by row.
void launch_mul_rows(float* x, const float* weight, int64_t n_rows, int64_t n_cols,
                     cudaStream_t stream);

}  // namespace sluice::cuda
