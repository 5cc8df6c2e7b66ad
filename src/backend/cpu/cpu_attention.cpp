// CpuBackend's KV writes and attention. Attention is one pass per (token, head) with an online
// softmax (running max, rescaled sum), so no score buffer of context length is needed and
// nothing is allocated. With an F16 cache the query is rounded to half and scored with the F16
// dot kernel, as llama.cpp's flash-attention path does; values accumulate in float32.
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/f16_rows.h"
#include "backend/cpu/vec_dot.h"
#include "core/error.h"

namespace sluice::cpu {
namespace {

constexpr int64_t kMaxHeadDim = 1024;

struct HeadAttention {
  const AttentionCall& call;
  VecDotFn dot;
  Fp32ToFp16RowFn to_half;
  AxpyF16Fn axpy_half;

  void run(int64_t t, int64_t h) const {
    const KvLayerView& kv = call.kv;
    const int64_t dk = kv.head_dim_k;
    const int64_t dv = kv.head_dim_v;
    const int64_t kv_head = h / (call.n_head / kv.n_head_kv);
    const float* q = call.q + (t * call.n_head + h) * dk;
    float* out = call.out + (t * call.n_head + h) * dv;
    const int64_t pos = call.pos0 + t;
    const int64_t first = call.window > 0 && pos - call.window + 1 > 0 ? pos - call.window + 1 : 0;

    uint16_t q_half[kMaxHeadDim];
    const bool half = kv.type == KvElement::kF16;
    if (half) to_half(q, q_half, dk);
    float acc[kMaxHeadDim];
    std::memset(acc, 0, sizeof(float) * size_t(dv));
    float max_score = -std::numeric_limits<float>::infinity();
    float sum = 0.0f;
    for (int64_t p = first; p <= pos; ++p) {
      const int64_t cell = p % kv.capacity;
      const int64_t k_off = (cell * kv.n_head_kv + kv_head) * dk;
      const int64_t v_off = (cell * kv.n_head_kv + kv_head) * dv;
      float score = half ? dot(static_cast<const uint16_t*>(kv.k) + k_off, q_half, dk)
                         : dot(static_cast<const float*>(kv.k) + k_off, q, dk);
      score *= call.scale;
      if (call.softcap > 0.0f) score = call.softcap * std::tanh(score / call.softcap);
      if (score > max_score) {
        const float rescale = std::exp(max_score - score);  // 0 on the first position
        for (int64_t d = 0; d < dv; ++d) acc[d] *= rescale;
        sum *= rescale;
        max_score = score;
      }
      const float weight = std::exp(score - max_score);
      sum += weight;
      if (half) {
        axpy_half(weight, static_cast<const uint16_t*>(kv.v) + v_off, acc, dv);
      } else {
        const float* v = static_cast<const float*>(kv.v) + v_off;
        for (int64_t d = 0; d < dv; ++d) acc[d] += weight * v[d];
      }
    }
    const float inv = 1.0f / sum;
    for (int64_t d = 0; d < dv; ++d) out[d] = acc[d] * inv;
  }
};

}  // namespace

void CpuBackend::kv_store(const KvLayerView& kv, const float* k, const float* v, int64_t n_tokens,
                          int64_t pos0) {
  const int64_t k_row = kv.n_head_kv * kv.head_dim_k;
  const int64_t v_row = kv.n_head_kv * kv.head_dim_v;
  const Fp32ToFp16RowFn to_half = fp32_to_fp16_row_kernel();
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t cell = (pos0 + t) % kv.capacity;
    if (kv.type == KvElement::kF16) {
      to_half(k + t * k_row, static_cast<uint16_t*>(kv.k) + cell * k_row, k_row);
      to_half(v + t * v_row, static_cast<uint16_t*>(kv.v) + cell * v_row, v_row);
    } else {
      std::memcpy(static_cast<float*>(kv.k) + cell * k_row, k + t * k_row, sizeof(float) * k_row);
      std::memcpy(static_cast<float*>(kv.v) + cell * v_row, v + t * v_row, sizeof(float) * v_row);
    }
  }
}

void CpuBackend::attention(const AttentionCall& call) {
  const KvLayerView& kv = call.kv;
  if (kv.head_dim_k > kMaxHeadDim || kv.head_dim_v > kMaxHeadDim) {
    fail("attention: head dimension ", kv.head_dim_k, "/", kv.head_dim_v, " exceeds ", kMaxHeadDim);
  }
  if (kv.n_head_kv <= 0 || call.n_head % kv.n_head_kv != 0) {
    fail("attention: ", call.n_head, " query heads do not group over ", kv.n_head_kv, " KV heads");
  }
  const QType k_type = kv.type == KvElement::kF16 ? QType::F16 : QType::F32;
  const HeadAttention head{call, vec_dot_kernel(k_type).fn, fp32_to_fp16_row_kernel(),
                           axpy_f16_kernel()};
  const int64_t n_items = call.n_tokens * call.n_head;
  parallel(n_items, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) head.run(i / call.n_head, i % call.n_head);
  });
}

}  // namespace sluice::cpu
