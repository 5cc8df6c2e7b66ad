// The dispatch of the reference dot products, the plain float types and the 32-element block
// types. Float rows accumulate in double, as ggml's ggml_float does; block types sum integers
// inside a block and apply the product of the two block scales once per block.
#include "quant/dot_reference.h"

#include <cstring>

#include "core/error.h"
#include "core/half.h"
#include "quant/blocks.h"
#include "quant/dot_reference_kernels.h"
#include "quant/float_formats.h"
#include "quant/iq_tables.h"

namespace sluice {
namespace dot {

float f32_f32(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const float*>(w);  // [n]
  const auto* b = static_cast<const float*>(x);  // [n]
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += double(a[i] * b[i]);
  return float(sum);
}

float f16_f16(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const uint16_t*>(w);  // [n] half bits
  const auto* b = static_cast<const uint16_t*>(x);  // [n] half bits
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += double(fp16_to_fp32(a[i]) * fp16_to_fp32(b[i]));
  return float(sum);
}

float bf16_bf16(const void* w, const void* x, int64_t n) {
  const auto* a = static_cast<const uint16_t*>(w);  // [n] bfloat16 bits
  const auto* b = static_cast<const uint16_t*>(x);  // [n] bfloat16 bits
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += double(bf16_to_fp32(a[i]) * bf16_to_fp32(b[i]));
  return float(sum);
}

// Nibble j of a 32-block holds element j (low) and element j + 16 (high).
float q4_0_q8_0(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ4_0*>(w);  // [n / 32]
  const auto* xb = static_cast<const BlockQ8_0*>(x);  // [n / 32]
  float sum = 0.0f;
  for (int64_t ib = 0; ib < n / kQK4_0; ++ib) {
    int sumi = 0;
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      sumi += ((wb[ib].qs[j] & 0xf) - 8) * xb[ib].qs[j];
      sumi += ((wb[ib].qs[j] >> 4) - 8) * xb[ib].qs[j + 16];
    }
    sum += float(sumi) * fp16_to_fp32(wb[ib].d) * fp16_to_fp32(xb[ib].d);
  }
  return sum;
}

// The minimum term uses Q8_1's stored s = d * sum(qs), so it costs one multiply per block.
float q4_1_q8_1(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ4_1*>(w);  // [n / 32]
  const auto* xb = static_cast<const BlockQ8_1*>(x);  // [n / 32]
  float sum = 0.0f;
  for (int64_t ib = 0; ib < n / kQK4_1; ++ib) {
    int sumi = 0;
    for (int j = 0; j < kQK4_1 / 2; ++j) {
      sumi += (wb[ib].qs[j] & 0xf) * xb[ib].qs[j];
      sumi += (wb[ib].qs[j] >> 4) * xb[ib].qs[j + 16];
    }
    sum += (fp16_to_fp32(wb[ib].d) * fp16_to_fp32(xb[ib].d)) * float(sumi) +
           fp16_to_fp32(wb[ib].m) * fp16_to_fp32(xb[ib].s);
  }
  return sum;
}

// Bit j of the 32-bit qh is the fifth bit of element j.
float q5_0_q8_0(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ5_0*>(w);  // [n / 32]
  const auto* xb = static_cast<const BlockQ8_0*>(x);  // [n / 32]
  float sum = 0.0f;
  for (int64_t ib = 0; ib < n / kQK5_0; ++ib) {
    uint32_t qh;
    std::memcpy(&qh, wb[ib].qh, sizeof(qh));
    int sumi = 0;
    for (int j = 0; j < kQK5_0 / 2; ++j) {
      const int low = int((wb[ib].qs[j] & 0xf) | (((qh >> j) & 1) << 4)) - 16;
      const int high = int((wb[ib].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;
      sumi += low * xb[ib].qs[j] + high * xb[ib].qs[j + 16];
    }
    sum += (fp16_to_fp32(wb[ib].d) * fp16_to_fp32(xb[ib].d)) * float(sumi);
  }
  return sum;
}

float q5_1_q8_1(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ5_1*>(w);  // [n / 32]
  const auto* xb = static_cast<const BlockQ8_1*>(x);  // [n / 32]
  float sum = 0.0f;
  for (int64_t ib = 0; ib < n / kQK5_1; ++ib) {
    uint32_t qh;
    std::memcpy(&qh, wb[ib].qh, sizeof(qh));
    int sumi = 0;
    for (int j = 0; j < kQK5_1 / 2; ++j) {
      const int low = int((wb[ib].qs[j] & 0xf) | (((qh >> j) & 1) << 4));
      const int high = int((wb[ib].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
      sumi += low * xb[ib].qs[j] + high * xb[ib].qs[j + 16];
    }
    sum += (fp16_to_fp32(wb[ib].d) * fp16_to_fp32(xb[ib].d)) * float(sumi) +
           fp16_to_fp32(wb[ib].m) * fp16_to_fp32(xb[ib].s);
  }
  return sum;
}

float q8_0_q8_0(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ8_0*>(w);  // [n / 32]
  const auto* xb = static_cast<const BlockQ8_0*>(x);  // [n / 32]
  float sum = 0.0f;
  for (int64_t ib = 0; ib < n / kQK8_0; ++ib) {
    int sumi = 0;
    for (int j = 0; j < kQK8_0; ++j) sumi += wb[ib].qs[j] * xb[ib].qs[j];
    sum += float(sumi) * (fp16_to_fp32(wb[ib].d) * fp16_to_fp32(xb[ib].d));
  }
  return sum;
}

// IQ4_NL and MXFP4 share a shape: a 4-bit index into a 16-entry table of integers, one scale.
float iq4_nl_q8_0(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockIQ4_NL*>(w);  // [n / 32]
  const auto* xb = static_cast<const BlockQ8_0*>(x);    // [n / 32]
  float sum = 0.0f;
  for (int64_t ib = 0; ib < n / kQK4_NL; ++ib) {
    const float d = fp16_to_fp32(wb[ib].d) * fp16_to_fp32(xb[ib].d);
    int sumi = 0;
    for (int j = 0; j < kQK4_NL / 2; ++j) {
      sumi += xb[ib].qs[j] * kValuesIq4nl[wb[ib].qs[j] & 0xf];
      sumi += xb[ib].qs[j + 16] * kValuesIq4nl[wb[ib].qs[j] >> 4];
    }
    sum += d * float(sumi);
  }
  return sum;
}

// kValuesMxfp4 holds the E2M1 values doubled, so the scale is half of 2^(e - 127).
float mxfp4_q8_0(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockMXFP4*>(w);  // [n / 32]
  const auto* xb = static_cast<const BlockQ8_0*>(x);   // [n / 32]
  float sum = 0.0f;
  for (int64_t ib = 0; ib < n / kQK_MXFP4; ++ib) {
    const float d = fp16_to_fp32(xb[ib].d) * e8m0_to_fp32_half(wb[ib].e);
    int sumi = 0;
    for (int j = 0; j < kQK_MXFP4 / 2; ++j) {
      sumi += xb[ib].qs[j] * kValuesMxfp4[wb[ib].qs[j] & 0xf];
      sumi += xb[ib].qs[j + 16] * kValuesMxfp4[wb[ib].qs[j] >> 4];
    }
    sum += d * float(sumi);
  }
  return sum;
}

}  // namespace dot

namespace {

struct DotEntry {
  QType weight;
  QType activation;
  VecDotFn kernel;
};

constexpr DotEntry kDots[] = {
    {QType::F32, QType::F32, dot::f32_f32},
    {QType::F16, QType::F16, dot::f16_f16},
    {QType::BF16, QType::BF16, dot::bf16_bf16},
    {QType::Q4_0, QType::Q8_0, dot::q4_0_q8_0},
    {QType::Q4_1, QType::Q8_1, dot::q4_1_q8_1},
    {QType::Q5_0, QType::Q8_0, dot::q5_0_q8_0},
    {QType::Q5_1, QType::Q8_1, dot::q5_1_q8_1},
    {QType::Q8_0, QType::Q8_0, dot::q8_0_q8_0},
    {QType::IQ4_NL, QType::Q8_0, dot::iq4_nl_q8_0},
    {QType::MXFP4, QType::Q8_0, dot::mxfp4_q8_0},
    {QType::Q2_K, QType::Q8_K, dot::q2_k_q8_k},
    {QType::Q3_K, QType::Q8_K, dot::q3_k_q8_k},
    {QType::Q4_K, QType::Q8_K, dot::q4_k_q8_k},
    {QType::Q5_K, QType::Q8_K, dot::q5_k_q8_k},
    {QType::Q6_K, QType::Q8_K, dot::q6_k_q8_k},
    {QType::IQ2_XXS, QType::Q8_K, dot::iq2_xxs_q8_k},
    {QType::IQ2_XS, QType::Q8_K, dot::iq2_xs_q8_k},
    {QType::IQ2_S, QType::Q8_K, dot::iq2_s_q8_k},
    {QType::IQ3_XXS, QType::Q8_K, dot::iq3_xxs_q8_k},
    {QType::IQ3_S, QType::Q8_K, dot::iq3_s_q8_k},
    {QType::IQ1_S, QType::Q8_K, dot::iq1_s_q8_k},
    {QType::IQ1_M, QType::Q8_K, dot::iq1_m_q8_k},
    {QType::IQ4_XS, QType::Q8_K, dot::iq4_xs_q8_k},
};

const DotEntry* find_dot(QType weight) {
  for (const auto& entry : kDots) {
    if (entry.weight == weight) return &entry;
  }
  return nullptr;
}

}  // namespace

std::optional<QType> activation_type_for(QType weight) {
  const DotEntry* entry = find_dot(weight);
  if (entry == nullptr) return std::nullopt;
  return entry->activation;
}

VecDotFn vec_dot_reference_of(QType weight) {
  const DotEntry* entry = find_dot(weight);
  return entry == nullptr ? nullptr : entry->kernel;
}

float vec_dot_reference(QType weight_type, const void* weight, const void* activation,
                        int64_t n_elements) {
  const DotEntry* entry = find_dot(weight_type);
  if (entry == nullptr) fail("vec_dot: no dot product for weight type ", qtype_name(weight_type));
  const uint32_t block = traits_of(weight_type).block_size;
  if (n_elements < 0 || n_elements % block != 0) {
    fail("vec_dot: ", n_elements, " elements is not a multiple of the ", qtype_name(weight_type),
         " block size ", block);
  }
  return entry->kernel(weight, activation, n_elements);
}

}  // namespace sluice
