// CpuBackend's matmul, embedding lookup and element-wise ops (attention and the KV writes are
// in cpu_attention.cpp). The float math follows ggml's CPU ops where that decides results:
// RMS norm sums squares in double, RoPE advances theta by repeated multiplication in float and
// follows ggml's rope_yarn for YaRN.
#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/activation_quantize.h"
#include "backend/cpu/rope_angles.h"
#include "backend/cpu/silu.h"
#include "backend/cpu/softmax.h"
#include "backend/cpu/tiled_kquant.h"
#include "backend/cpu/vec_dot.h"
#include "core/error.h"
#include "core/half.h"
#include "quant/blocks.h"
#include "quant/dequantize.h"
#include "quant/dot_reference.h"
#include "quant/quantize.h"

namespace sluice::cpu {

CpuBackend::CpuBackend(ThreadPool* pool) : pool_(pool) {}

void CpuBackend::matmul(const MatrixView& w, const float* x, float* y, int64_t n_tokens) {
  const auto act_type = activation_type_for(w.type);
  const VecDotKernel kernel = vec_dot_kernel(w.type);
  if (!act_type || kernel.fn == nullptr) fail("matmul: no dot product for ", qtype_name(w.type));
  const int64_t n_cols = w.n_cols;
  const int64_t act_row = int64_t(*row_bytes(*act_type, uint64_t(n_cols)));
  const int64_t w_row = int64_t(*row_bytes(w.type, uint64_t(n_cols)));

  const uint8_t* x_q = quantize_activations(*act_type, x, n_tokens, n_cols);

  const auto* rows = static_cast<const uint8_t*>(w.data);
  if (use_tiled_kquant(w.type, n_tokens)) return matmul_tiled(w, x_q, act_row, y, n_tokens);
  if (const VecDotScaledFn scaled = vec_dot_scaled_kernel(w.type);
      scaled != nullptr && (*act_type == QType::Q8_1 || *act_type == QType::Q8_0)) {
    return matmul_scaled(scaled, *act_type, rows, w_row, w.n_rows, x_q, act_row, y, n_tokens,
                         n_cols);
  }
  const VecDotFn dot = kernel.fn;
  const int64_t n_rows = w.n_rows;
  // Rows outside, tokens inside: a weight row stays in L1 while every token uses it.
  auto body = [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const uint8_t* row = rows + r * w_row;
      for (int64_t t = 0; t < n_tokens; ++t)
        y[t * n_rows + r] = dot(row, x_q + t * act_row, n_cols);
    }
  };
  const int n_threads = pool_ != nullptr ? pool_->size() : 1;
  int64_t chunk = n_rows / (8 * n_threads);
  if (chunk < 1) chunk = 1;
  parallel(n_rows, chunk, body);
}

// llama.cpp's tiled path for batches of K-quant / IQ weights (tiled_kquant.h): activations
// repacked once, then groups of 16 rows split over the pool.
void CpuBackend::matmul_tiled(const MatrixView& w, const uint8_t* x_q, int64_t act_row, float* y,
                              int64_t n_tokens) {
  const size_t need = tiled_activation_bytes(n_tokens, w.n_cols);
  if (tiled_activations_.size() < need) tiled_activations_.resize(need);
  uint8_t* packed = tiled_activations_.data();
  pack_tiled_activations_avx2(w.type, x_q, act_row, n_tokens, w.n_cols, packed);
  const auto* rows = static_cast<const uint8_t*>(w.data);
  const int64_t w_row = int64_t(*row_bytes(w.type, uint64_t(w.n_cols)));
  constexpr int64_t kRowGroup = 16;
  const int64_t n_groups = (w.n_rows + kRowGroup - 1) / kRowGroup;
  const int n_threads = pool_ != nullptr ? pool_->size() : 1;
  parallel(n_groups, std::max<int64_t>(1, n_groups / (4 * n_threads)), [&](int64_t lo, int64_t hi) {
    tiled_kquant_rows_avx2(w.type, rows, w_row, lo * kRowGroup, std::min(hi * kRowGroup, w.n_rows),
                           packed, n_tokens, w.n_cols, y, w.n_rows, tiled_accumulate());
  });
}

const uint8_t* CpuBackend::quantize_activations(QType act_type, const float* x, int64_t n,
                                                int64_t n_cols) {
  if (act_type == QType::F32) return reinterpret_cast<const uint8_t*>(x);
  const int64_t act_row = int64_t(*row_bytes(act_type, uint64_t(n_cols)));
  const size_t need = size_t(n * act_row);
  if (activations_.size() < need) activations_.resize(need);
  const QuantizeFn quantize = activation_quantizer(act_type);
  uint8_t* dst = activations_.data();
  parallel(n, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) quantize(x + t * n_cols, dst + t * act_row, n_cols);
  });
  return dst;
}

const float* CpuBackend::activation_block_scales(QType act_type, const uint8_t* x_q, int64_t n,
                                                 int64_t act_row, int64_t n_cols) {
  const int64_t n_blocks = n_cols / kQK8_0;  // Q8_0 and Q8_1 blocks both hold 32
  const int64_t stride = 2 * n_blocks;       // d, s per block
  if (activation_scales_.size() < size_t(n * stride)) activation_scales_.resize(size_t(n * stride));
  float* scales = activation_scales_.data();
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t b = 0; b < n_blocks; ++b) {
      float* scale = scales + t * stride + 2 * b;
      if (act_type == QType::Q8_1) {
        const auto& block = reinterpret_cast<const BlockQ8_1*>(x_q + t * act_row)[b];
        scale[0] = fp16_to_fp32(block.d), scale[1] = fp16_to_fp32(block.s);
      } else {
        const auto& block = reinterpret_cast<const BlockQ8_0*>(x_q + t * act_row)[b];
        scale[0] = fp16_to_fp32(block.d), scale[1] = 0.0f;
      }
    }
  }
  return scales;
}

// Each activation block's scales converted to float once here, not once per weight row in the
// kernel: rows outside, up to four tokens inside, as in matmul.
void CpuBackend::matmul_scaled(VecDotScaledFn dot, QType act_type, const uint8_t* rows,
                               int64_t w_row, int64_t n_rows, const uint8_t* x_q, int64_t act_row,
                               float* y, int64_t n_tokens, int64_t n_cols) {
  const int64_t stride = 2 * (n_cols / kQK8_0);
  const float* scales = activation_block_scales(act_type, x_q, n_tokens, act_row, n_cols);
  auto body = [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      for (int64_t t = 0; t < n_tokens; t += 4) {
        dot(rows + r * w_row, x_q + t * act_row, act_row, scales + t * stride, stride,
            std::min<int64_t>(4, n_tokens - t), y + t * n_rows + r, n_rows, n_cols);
      }
    }
  };
  const int n_threads = pool_ != nullptr ? pool_->size() : 1;
  parallel(n_rows, std::max<int64_t>(1, n_rows / (8 * n_threads)), body);
}

void CpuBackend::get_rows(const MatrixView& table, const int32_t* ids, int64_t n, float* out) {
  const int64_t row = int64_t(*row_bytes(table.type, uint64_t(table.n_cols)));
  const auto* base = static_cast<const uint8_t*>(table.data);
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= table.n_rows) {
      fail("token id ", ids[i], " is outside the embedding table (", table.n_rows, " rows)");
    }
    dequantize_row(table.type, base + ids[i] * row, out + i * table.n_cols, table.n_cols);
  }
}

void CpuBackend::rms_norm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n,
                          float eps) {
  parallel(n_rows, row_chunk(n_rows), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) rms_norm_row(x + r * n, weight, y + r * n, n, eps);
  });
}

void CpuBackend::rms_norm_row(const float* x, const float* weight, float* y, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += double(x[i] * x[i]);
  const float mean = float(sum / double(n));
  const float factor = 1.0f / std::sqrt(mean + eps);
  if (weight != nullptr) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * factor) * weight[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * factor;
  }
}

void CpuBackend::rope(float* x, int64_t n_tokens, int64_t n_head, int64_t head_dim, int64_t pos0,
                      const RopeConfig& config) {
  if (config.style == RopeStyle::kNone || config.n_rot == 0) return;
  const int64_t n_rot = config.n_rot;
  if (n_rot > head_dim) fail("rope: bad n_rot ", n_rot);
  const RopeAngleConstants constants = rope_angle_constants(config);
  // Tokens are independent: each thread rotates its own with its own angle caches.
  parallel(n_tokens, row_chunk(n_tokens), [&](int64_t t_lo, int64_t t_hi) {
    float cos_cache[kMaxRopeRot / 2];
    float sin_cache[kMaxRopeRot / 2];
    for (int64_t t = t_lo; t < t_hi; ++t) {
      rope_angles(config, constants, pos0 + t, cos_cache, sin_cache);
      for (int64_t h = 0; h < n_head; ++h) {
        float* v = x + (t * n_head + h) * head_dim;
        const int64_t half = n_rot / 2;
        for (int64_t i = 0; i < half; ++i) {
          const int64_t a = config.style == RopeStyle::kNormal ? 2 * i : i;
          const int64_t b = config.style == RopeStyle::kNormal ? 2 * i + 1 : i + half;
          const float x0 = v[a];
          const float x1 = v[b];
          // Fused as ggml's build fuses them (its compiler contracts a*b - c*d into one FMA).
          v[a] = std::fma(x0, cos_cache[i], -(x1 * sin_cache[i]));
          v[b] = std::fma(x0, sin_cache[i], x1 * cos_cache[i]);
        }
      }
    }
  });
}

void CpuBackend::glu(GluActivation act, float* gate, const float* up, int64_t n_rows,
                     int64_t n_cols) {
  if (act == GluActivation::kSilu) {
    parallel(n_rows, row_chunk(n_rows), [&](int64_t lo, int64_t hi) {
      swiglu_rows(gate + lo * n_cols, up + lo * n_cols, hi - lo, n_cols);
    });
    return;
  }
  if (act == GluActivation::kGeluTanhF16) {
    parallel(n_rows, row_chunk(n_rows), [&](int64_t lo, int64_t hi) {
      geglu_f16_rows(gate + lo * n_cols, up + lo * n_cols, (hi - lo) * n_cols);
    });
    return;
  }
  if (act == GluActivation::kSwigluOai) {
    // llama.cpp's constants for gpt-oss (build_moe_ffn, LLM_FFN_SWIGLU_OAI_MOE).
    swiglu_oai(gate, up, n_rows * n_cols, 1.702f, 7.0f);
    return;
  }
  for (int64_t i = 0; i < n_rows * n_cols; ++i) gate[i] = gelu_tanh(gate[i]) * up[i];
}

void CpuBackend::mul_sigmoid(float* x, const float* gate, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= 1.0f / (1.0f + std::exp(-gate[i]));
}

void CpuBackend::add(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void CpuBackend::add_bias(float* x, const float* bias, int64_t n_rows, int64_t n_cols) {
  for (int64_t r = 0; r < n_rows; ++r) add(x + r * n_cols, bias, n_cols);
}

void CpuBackend::scale(float* x, float factor, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

void CpuBackend::softcap(float* x, float cap, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

void CpuBackend::softmax_rows(float* x, int64_t n_rows, int64_t n_cols) {
  for (int64_t r = 0; r < n_rows; ++r) softmax_row(x + r * n_cols, n_cols);
}

}  // namespace sluice::cpu
