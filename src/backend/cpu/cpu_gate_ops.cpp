// CpuBackend's gates and broadcast products: an attention output gate (mul_gate) and a row
// multiplied by a weight vector (mul_rows). The float steps are those of the host loops they
// replaced in model/ (attention.cpp's output gate, gemma4's router input scale), so the CPU's
// numbers did not move: the activation of every logit first, then one product per element.
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace sluice::cpu {
namespace {

// ggml's softplus: the input itself above 20, where log(1 + e^x) rounds to x anyway.
float softplus(float x) {
  return x > 20.0f ? x : std::log(1.0f + std::exp(x));
}

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

}  // namespace

void CpuBackend::mul_gate(GateActivation act, float* x, float* gate, int64_t n_rows, int64_t n_cols,
                          int64_t n_gate) {
  if (n_gate <= 0 || n_cols % n_gate != 0) {
    fail("mul_gate: ", n_gate, " gate logits do not divide a row of ", n_cols);
  }
  const int64_t n_logits = n_rows * n_gate;
  if (act == GateActivation::kSoftplus) {
    for (int64_t i = 0; i < n_logits; ++i) gate[i] = softplus(gate[i]);
  } else {
    for (int64_t i = 0; i < n_logits; ++i) gate[i] = sigmoid(gate[i]);
  }
  const int64_t per_logit = n_cols / n_gate;  // 1, or a head's values
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t i = 0; i < n_cols; ++i) x[r * n_cols + i] *= gate[r * n_gate + i / per_logit];
  }
}

void CpuBackend::mul_rows(float* x, const float* weight, int64_t n_rows, int64_t n_cols) {
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t i = 0; i < n_cols; ++i) x[r * n_cols + i] *= weight[i];
  }
}

}  // namespace sluice::cpu
