// quantize_row() dispatch and the reference quantizers of the non-K formats: F16/BF16, the
// 32-element legacy blocks, MXFP4, TQ1_0/TQ2_0, and the Q8_1 / Q8_K activation blocks. K-quant
// quantizers live in quantize_k*.cpp (their own owner) and join here through one line each in
// quantizer_of.
#include "quant/quantize.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/half.h"
#include "quant/blocks.h"
#include "quant/float_formats.h"
#include "quant/iq_tables.h"
#include "quant/quantize_k.h"

namespace sluice {
namespace {

// float -> integer as numpy's astype does on x86 (a 32-bit truncating convert, then the low
// bits): defined for every input, so NaN or an overflowing block can not reach C++'s UB.
int32_t truncate_like_numpy(float v) {
  if (!(v > -2147483648.0f && v < 2147483648.0f)) return INT32_MIN;  // cvttss2si's "invalid"
  return static_cast<int32_t>(v);
}
uint8_t to_u8(float v) {
  return static_cast<uint8_t>(truncate_like_numpy(v));
}

// Round half away from zero, as C roundf and gguf-py's np_roundf.
int8_t round_to_i8(float v) {
  return static_cast<int8_t>(truncate_like_numpy(std::round(v)));
}

// Round half to even through the float adder: adding 1.5 * 2^23 leaves the rounded integer in
// the low mantissa bits (valid for |v| < 2^22). ggml's Q8_K uses exactly this rounding.
int round_half_even(float v) {
  const float shifted = v + 12582912.0f;
  return int(fp32_to_bits(shifted) & 0x007fffff) - 0x00400000;
}

// The element of largest magnitude, keeping its sign; the first one wins a tie.
float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

float absmax(const float* x, int n) {
  float amax = 0.0f;
  for (int j = 0; j < n; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  return amax;
}

float inverse_or_zero(float d) {
  return d != 0.0f ? 1.0f / d : 0.0f;
}

// Q4_0 and Q5_0: symmetric, the scale chosen so the largest-magnitude element maps to -levels/2.
// Returns the quants (0 .. levels-1) and the scale.
float quantize_symmetric(const float* x, int levels, uint8_t* q) {
  const float d = signed_absmax(x, 32) / float(-levels / 2);
  const float id = inverse_or_zero(d);
  const float offset = float(levels / 2) + 0.5f;
  for (int j = 0; j < 32; ++j) {
    const uint8_t v = to_u8(x[j] * id + offset);
    q[j] = v < levels ? v : uint8_t(levels - 1);
  }
  return d;
}

// Q4_1 and Q5_1: affine over [min, max]. Returns the scale; `min` receives the offset.
float quantize_affine(const float* x, int levels, uint8_t* q, float& min) {
  float max = x[0];
  min = x[0];
  for (int j = 1; j < 32; ++j) {
    max = std::fmax(max, x[j]);
    min = std::fmin(min, x[j]);
  }
  const float d = (max - min) / float(levels - 1);
  const float id = inverse_or_zero(d);
  for (int j = 0; j < 32; ++j) {
    const uint8_t v = to_u8((x[j] - min) * id + 0.5f);
    q[j] = v < levels ? v : uint8_t(levels - 1);
  }
  return d;
}

// Nibbles: element j low, element j + 16 high. Returns the fifth bits, bit j for element j.
uint32_t pack_nibbles(const uint8_t* q, uint8_t* qs) {
  uint32_t high = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = uint8_t((q[j] & 0x0f) | (q[j + 16] << 4));
    high |= uint32_t(q[j] >> 4) << j;
    high |= uint32_t(q[j + 16] >> 4) << (j + 16);
  }
  return high;
}

// Adapts a quantizer that takes its own block type (as quant/quantize_k.h declares them) to
// QuantizeFn, so hooking one into quantizer_of stays one line: with_blocks<BlockQ4_K, fn>.
template <class Block, void (*Fn)(const float*, Block*, int64_t)>
[[maybe_unused]] void with_blocks(const float* src, void* dst, int64_t n) {
  Fn(src, static_cast<Block*>(dst), n);
}

}  // namespace

void quantize_row_f32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, size_t(n) * sizeof(float));
}

void quantize_row_f16(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) out[i] = fp32_to_fp16(src[i]);
}

void quantize_row_bf16(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) out[i] = fp32_to_bf16(src[i]);
}

void quantize_row_q4_0(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < n / kQK4_0; ++i, src += kQK4_0) {
    uint8_t q[32];
    blocks[i].d = fp32_to_fp16(quantize_symmetric(src, 16, q));
    pack_nibbles(q, blocks[i].qs);
  }
}

void quantize_row_q4_1(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ4_1*>(dst);
  for (int64_t i = 0; i < n / kQK4_1; ++i, src += kQK4_1) {
    uint8_t q[32];
    float min;
    blocks[i].d = fp32_to_fp16(quantize_affine(src, 16, q, min));
    blocks[i].m = fp32_to_fp16(min);
    pack_nibbles(q, blocks[i].qs);
  }
}

void quantize_row_q5_0(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ5_0*>(dst);
  for (int64_t i = 0; i < n / kQK5_0; ++i, src += kQK5_0) {
    uint8_t q[32];
    blocks[i].d = fp32_to_fp16(quantize_symmetric(src, 32, q));
    const uint32_t high = pack_nibbles(q, blocks[i].qs);
    std::memcpy(blocks[i].qh, &high, sizeof(high));
  }
}

void quantize_row_q5_1(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ5_1*>(dst);
  for (int64_t i = 0; i < n / kQK5_1; ++i, src += kQK5_1) {
    uint8_t q[32];
    float min;
    blocks[i].d = fp32_to_fp16(quantize_affine(src, 32, q, min));
    blocks[i].m = fp32_to_fp16(min);
    const uint32_t high = pack_nibbles(q, blocks[i].qs);
    std::memcpy(blocks[i].qh, &high, sizeof(high));
  }
}

void quantize_row_q8_0(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK8_0; ++i, src += kQK8_0) {
    const float d = absmax(src, kQK8_0) / 127.0f;
    const float id = inverse_or_zero(d);
    blocks[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK8_0; ++j) blocks[i].qs[j] = round_to_i8(src[j] * id);
  }
}

void quantize_row_mxfp4(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockMXFP4*>(dst);
  for (int64_t i = 0; i < n / kQK_MXFP4; ++i, src += kQK_MXFP4) {
    const float amax = absmax(src, kQK_MXFP4);
    // The shared exponent puts the largest element within the top E2M1 binade (4 .. 6 x 2^k).
    const uint8_t e = amax > 0.0f ? to_u8(std::floor(std::log2(amax)) - 2.0f + 127.0f) : 0;
    const float d = e8m0_to_fp32_half(e);
    blocks[i].e = e;
    uint8_t q[kQK_MXFP4];
    for (int j = 0; j < kQK_MXFP4; ++j) {
      // Nearest representable value; the first index wins ties (so +0 beats -0).
      int best = 0;
      float best_err = std::fabs(d * float(kValuesMxfp4[0]) - src[j]);
      for (int k = 1; k < 16; ++k) {
        const float err = std::fabs(d * float(kValuesMxfp4[k]) - src[j]);
        if (err < best_err) {
          best_err = err;
          best = k;
        }
      }
      q[j] = uint8_t(best);
    }
    for (int j = 0; j < kQK_MXFP4 / 2; ++j) {
      blocks[i].qs[j] = uint8_t(q[j] | (q[j + kQK_MXFP4 / 2] << 4));
    }
  }
}

namespace {

// TQ1_0 / TQ2_0: each weight is -1, 0 or +1 times the block's absolute maximum; returns the
// digits 0 .. 2 (weight + 1) and the scale.
float ternary_digits(const float* x, uint8_t* q) {
  const float d = absmax(x, kQK_K);
  const float id = inverse_or_zero(d);
  for (int j = 0; j < kQK_K; ++j) q[j] = uint8_t(round_to_i8(x[j] * id) + 1);
  return d;
}

// Five (or four) base-3 digits as a number 0 .. 242, stored as the fraction n/243 of 256
// rounded up, so that multiplying by 3^k and taking (byte * 3) >> 8 reads digit k back.
uint8_t pack_base3(const uint8_t* q, int stride, int count) {
  static constexpr int kWeights[5] = {81, 27, 9, 3, 1};
  int value = 0;
  for (int k = 0; k < count; ++k) value += q[k * stride] * kWeights[k];
  return uint8_t((value * 256 + 242) / 243);
}

}  // namespace

void quantize_row_tq1_0(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockTQ1_0*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    uint8_t q[kQK_K];
    blocks[i].d = fp32_to_fp16(ternary_digits(src, q));
    for (int m = 0; m < 32; ++m) blocks[i].qs[m] = pack_base3(q + m, 32, 5);  // 0 .. 159
    for (int m = 0; m < 16; ++m) blocks[i].qs[32 + m] = pack_base3(q + 160 + m, 16, 5);
    for (int m = 0; m < 4; ++m) blocks[i].qh[m] = pack_base3(q + 240 + m, 4, 4);  // 240 .. 255
  }
}

void quantize_row_tq2_0(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockTQ2_0*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    uint8_t q[kQK_K];
    blocks[i].d = fp32_to_fp16(ternary_digits(src, q));
    for (int b = 0; b < kQK_K / 4; ++b) {
      // Byte 32h + m holds elements 128h + 32k + m in bit pairs k = 0 .. 3.
      const uint8_t* g = q + 128 * (b / 32) + b % 32;
      blocks[i].qs[b] = uint8_t(g[0] | (g[32] << 2) | (g[64] << 4) | (g[96] << 6));
    }
  }
}

void quantize_row_q8_1(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < n / kQK8_1; ++i, src += kQK8_1) {
    const float d = absmax(src, kQK8_1) / 127.0f;
    const float id = inverse_or_zero(d);
    int sum = 0;
    for (int j = 0; j < kQK8_1; ++j) {
      blocks[i].qs[j] = round_to_i8(src[j] * id);
      sum += blocks[i].qs[j];
    }
    blocks[i].d = fp32_to_fp16(d);
    blocks[i].s = fp32_to_fp16(float(sum) * d);  // lets dot products fold a Q4_1/Q5_1 minimum
  }
}

void quantize_row_q8_k(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    BlockQ8_K& b = blocks[i];
    const float max = signed_absmax(src, kQK_K);
    if (max == 0.0f) {
      std::memset(&b, 0, sizeof(b));
      continue;
    }
    // The scale is negative when the extreme element is positive: that element maps to -127,
    // never +128, which the IQ dot kernels rely on (int8 quants stay within -127 .. 127).
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQK_K; ++j) {
      const int v = round_half_even(iscale * src[j]);
      b.qs[j] = int8_t(v < 127 ? v : 127);
    }
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += b.qs[16 * g + j];
      b.bsums[g] = int16_t(sum);
    }
    b.d = 1.0f / iscale;
  }
}

QuantizeFn quantizer_of(QType type) {
  switch (type) {
    case QType::F32:
      return quantize_row_f32;
    case QType::F16:
      return quantize_row_f16;
    case QType::BF16:
      return quantize_row_bf16;
    case QType::Q4_0:
      return quantize_row_q4_0;
    case QType::Q4_1:
      return quantize_row_q4_1;
    case QType::Q5_0:
      return quantize_row_q5_0;
    case QType::Q5_1:
      return quantize_row_q5_1;
    case QType::Q8_0:
      return quantize_row_q8_0;
    case QType::Q8_1:
      return quantize_row_q8_1;
    case QType::Q8_K:
      return quantize_row_q8_k;
    case QType::MXFP4:
      return quantize_row_mxfp4;
    case QType::TQ1_0:
      return quantize_row_tq1_0;
    case QType::TQ2_0:
      return quantize_row_tq2_0;
    case QType::Q2_K:
      return with_blocks<BlockQ2_K, quantize_row_q2_k>;
    case QType::Q3_K:
      return with_blocks<BlockQ3_K, quantize_row_q3_k>;
    case QType::Q4_K:
      return with_blocks<BlockQ4_K, quantize_row_q4_k>;
    case QType::Q5_K:
      return with_blocks<BlockQ5_K, quantize_row_q5_k>;
    case QType::Q6_K:
      return with_blocks<BlockQ6_K, quantize_row_q6_k>;
    default:
      return nullptr;
  }
}

void quantize_row(QType type, const float* src, void* dst, int64_t n_elements) {
  const auto& traits = traits_of(type);
  const QuantizeFn fn = quantizer_of(type);
  if (fn == nullptr) fail("quantize: no quantizer for ", traits.name);
  if (n_elements < 0 || n_elements % traits.block_size != 0) {
    fail("quantize: ", n_elements, " elements is not a whole number of ", traits.name,
         " blocks of ", traits.block_size);
  }
  fn(src, dst, n_elements);
}

}  // namespace sluice
