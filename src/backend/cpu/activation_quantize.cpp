// Q8_0 / Q8_1 activation quantizers with ggml-cpu's x86 arithmetic (see the header).
#include "backend/cpu/activation_quantize.h"

#include <cmath>

#include "core/half.h"
#include "quant/blocks.h"

namespace sluice::cpu {
namespace {

// Scale of one 32-element block: d = amax / 127 is stored, and values are multiplied by
// 127 / amax (not 1 / d) and rounded to nearest even, as _mm256_round_ps does.
struct BlockScale {
  float d;
  float id;
};

BlockScale block_scale(const float* x) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  return {amax / 127.0f, amax != 0.0f ? 127.0f / amax : 0.0f};
}

int8_t quantize(float x, float id) {
  return int8_t(std::nearbyint(x * id));  // |x * id| <= 127 by construction
}

}  // namespace

void quantize_activations_q8_0(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK8_0; ++i, src += kQK8_0) {
    const BlockScale s = block_scale(src);
    blocks[i].d = fp32_to_fp16(s.d);
    for (int j = 0; j < kQK8_0; ++j) blocks[i].qs[j] = quantize(src[j], s.id);
  }
}

void quantize_activations_q8_1(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < n / kQK8_1; ++i, src += kQK8_1) {
    const BlockScale s = block_scale(src);
    int sum = 0;
    for (int j = 0; j < kQK8_1; ++j) {
      blocks[i].qs[j] = quantize(src[j], s.id);
      sum += blocks[i].qs[j];
    }
    blocks[i].d = fp32_to_fp16(s.d);
    blocks[i].s = fp32_to_fp16(s.d * float(sum));
  }
}

QuantizeFn activation_quantizer(QType activation_type) {
  static const CpuIsa isa = isa_supported(CpuIsa::kAvx2) ? CpuIsa::kAvx2 : CpuIsa::kScalar;
  return activation_quantizer(activation_type, isa);
}

QuantizeFn activation_quantizer(QType activation_type, CpuIsa isa) {
  const bool avx2 = isa != CpuIsa::kScalar;
  switch (activation_type) {
    case QType::Q8_0:
      return avx2 ? quantize_activations_q8_0_avx2 : quantize_activations_q8_0;
    case QType::Q8_1:
      return avx2 ? quantize_activations_q8_1_avx2 : quantize_activations_q8_1;
    default:
      return quantizer_of(activation_type);
  }
}

}  // namespace sluice::cpu
