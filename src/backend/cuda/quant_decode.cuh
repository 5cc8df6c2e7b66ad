// Device-side decoding of weight blocks: for every supported type, `BlockDecoder<type>` turns
// group g (elements 8g .. 8g+7) of one block into 8 floats. The matvec, matmul and get_rows
// kernels are written once over this interface. Layouts and float grouping follow quant/'s
// scalar reference (quant/dequantize_*.cpp); with kExact the values are bit-identical to it
// (no contracted multiply-add), which get_rows needs; the products use the faster fused form.
//
// Alignment: a block is read with loads no wider than the alignment its size guarantees when
// the row starts on a 16-byte boundary (2 bytes for 18-byte Q4_0 blocks, 16 for Q4_K, ...).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "backend/cuda/quant_tables.cuh"
#include "quant/blocks.h"
#include "quant/qtype.h"

namespace sluice::cuda::quant {

// ---- scalar helpers (also built for the host, where a test can check the layouts) ----------

__host__ __device__ __forceinline__ float bits_to_float(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float value;
  memcpy(&value, &bits, sizeof(value));
  return value;
#endif
}
__host__ __device__ __forceinline__ float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
__host__ __device__ __forceinline__ float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

__host__ __device__ __forceinline__ float half_bits_to_float(uint16_t h) {
  return __half2float(__ushort_as_half(h));
}
__host__ __device__ __forceinline__ float bf16_bits_to_float(uint16_t h) {
  return bits_to_float(uint32_t(h) << 16);
}

// An integer 0 <= q < 2^23 minus `offset` as float, exactly: 2^23 + q has q in its mantissa, so
// one OR and one subtraction replace the (quarter-rate) integer-to-float conversion.
__host__ __device__ __forceinline__ float int_to_float(uint32_t q, float offset = 0.0f) {
  return bits_to_float(0x4B000000u | q) - (8388608.0f + offset);
}

// a * b + c with or without rounding the product first (kExact: as the scalar reference).
template <bool kExact>
__host__ __device__ __forceinline__ float mul_add(float a, float b, float c) {
  if constexpr (kExact) return add_rn(mul_rn(a, b), c);
  return fmaf(a, b, c);
}

__host__ __device__ __forceinline__ uint16_t load_u16(const uint8_t* p) {  // p 2-byte aligned
  return *reinterpret_cast<const uint16_t*>(p);
}
__host__ __device__ __forceinline__ uint32_t load_u32_a2(const uint8_t* p) {  // p 2-byte aligned
  return uint32_t(load_u16(p)) | (uint32_t(load_u16(p + 2)) << 16);
}
__host__ __device__ __forceinline__ uint32_t load_u32(const uint8_t* p) {  // p 4-byte aligned
  return *reinterpret_cast<const uint32_t*>(p);
}
__host__ __device__ __forceinline__ uint2 load_u64(const uint8_t* p) {  // p 8-byte aligned
  return *reinterpret_cast<const uint2*>(p);
}
__host__ __device__ __forceinline__ uint32_t load_u32_a1(const uint8_t* p) {  // any alignment
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}

// Half of 2^(e - 127): the MXFP4 block scale (quant/float_formats.h, e8m0_to_fp32_half).
__host__ __device__ __forceinline__ float e8m0_half(uint8_t e) {
  return bits_to_float(e < 2 ? (0x00200000u << e) : (uint32_t(e - 1) << 23));
}

// Nibble k (0..7) of a 32-bit word.
__host__ __device__ __forceinline__ uint32_t nibble(uint32_t word, int k) {
  return (word >> (4 * k)) & 0xfu;
}

// Q4_K / Q5_K 6-bit scale and min of sub-block `sub` (quant/dequantize_k.cpp, unpack_scale_min).
__host__ __device__ __forceinline__ void k_scale_min(const uint8_t* packed, int sub,
                                                     uint32_t& scale, uint32_t& min) {
  if (sub < 4) {
    scale = packed[sub] & 0x3f;
    min = packed[sub + 4] & 0x3f;
  } else {
    scale = (packed[sub + 4] & 0x0f) | ((packed[sub - 4] >> 2) & 0x30);
    min = (packed[sub + 4] >> 4) | ((packed[sub] >> 2) & 0x30);
  }
}

// Q3_K's signed 6-bit scale of 16-element sub-block k, from the 12 packed bytes.
__host__ __device__ __forceinline__ int q3_k_scale(const uint8_t* packed, int k) {
  const int low = (packed[k % 8] >> (4 * (k / 8))) & 0xf;
  const int high = (packed[8 + k % 4] >> (2 * (k / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// ---- per-type decoders ----------------------------------------------------------------------
// kElems: elements per block; kBytes: bytes per block; kAlign: the alignment blocks keep when
// the row starts 16-byte aligned; decode<kExact>(block, g, v): v[j] = element 8g + j.

template <QType kType>
struct BlockDecoder;

// Plain types: a "block" is 8 consecutive elements.
template <>
struct BlockDecoder<QType::F32> {
  static constexpr int kElems = 8, kBytes = 32, kAlign = 16;
  template <bool kExact>
  __host__ __device__ static void decode(const uint8_t* b, int, float* v) {
    const float4 a = reinterpret_cast<const float4*>(b)[0];
    const float4 c = reinterpret_cast<const float4*>(b)[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = c.x, v[5] = c.y, v[6] = c.z, v[7] = c.w;
  }
};
template <>
struct BlockDecoder<QType::F16> {
  static constexpr int kElems = 8, kBytes = 16, kAlign = 16;
  template <bool kExact>
  __host__ __device__ static void decode(const uint8_t* b, int, float* v) {
    const uint4 q = *reinterpret_cast<const uint4*>(b);
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
    for (int k = 0; k < 4; ++k) {
      v[2 * k] = half_bits_to_float(uint16_t(w[k] & 0xffff));
      v[2 * k + 1] = half_bits_to_float(uint16_t(w[k] >> 16));
    }
  }
};
template <>
struct BlockDecoder<QType::BF16> {
  static constexpr int kElems = 8, kBytes = 16, kAlign = 16;
  template <bool kExact>
  __host__ __device__ static void decode(const uint8_t* b, int, float* v) {
    const uint4 q = *reinterpret_cast<const uint4*>(b);
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
    for (int k = 0; k < 4; ++k) {
      v[2 * k] = bits_to_float(w[k] << 16);
      v[2 * k + 1] = bits_to_float(w[k] & 0xffff0000u);
    }
  }
};

// 32-element blocks: groups 0,1 are the low nibbles of qs[0..15], groups 2,3 the high nibbles.
template <>
struct BlockDecoder<QType::Q4_0> {
  static constexpr int kElems = 32, kBytes = 18, kAlign = 2;
  template <bool kExact>
  __host__ __device__ static void decode(const uint8_t* b, int g, float* v) {
    const float d = half_bits_to_float(load_u16(b));
    const uint8_t* qs = b + 2 + 8 * (g & 1);
    const uint32_t w[2] = {load_u32_a2(qs), load_u32_a2(qs + 4)};
    const int shift = (g >> 1) * 4;
    for (int j = 0; j < 8; ++j) {
      v[j] = d * int_to_float((w[j / 4] >> (8 * (j % 4) + shift)) & 0xf, 8.0f);
    }
  }
};
template <>
struct BlockDecoder<QType::Q4_1> {
  static constexpr int kElems = 32, kBytes = 20, kAlign = 4;
  template <bool kExact>
  __host__ __device__ static void decode(const uint8_t* b, int g, float* v) {
    const uint32_t dm = load_u32(b);
    const float d = half_bits_to_float(uint16_t(dm & 0xffff));
    const float m = half_bits_to_float(uint16_t(dm >> 16));
    const uint8_t* qs = b + 4 + 8 * (g & 1);
    const uint32_t w[2] = {load_u32(qs), load_u32(qs + 4)};
    const int shift = (g >> 1) * 4;
    for (int j = 0; j < 8; ++j) {
      v[j] = mul_add<kExact>(d, int_to_float((w[j / 4] >> (8 * (j % 4) + shift)) & 0xf), m);
    }
  }
};
template <>
struct BlockDecoder<QType::Q5_0> {
  static constexpr int kElems = 32, kBytes = 22, kAlign = 2;
  template <bool kExact>
  __host__ __device__ static void decode(const uint8_t* b, int g, float* v) {
    const float d = half_bits_to_float(load_u16(b));
    const uint32_t qh = load_u32_a2(b + 2) >> (8 * g);  // bit j: fifth bit of element 8g + j
    const uint8_t* qs = b + 6 + 8 * (g & 1);
    const uint32_t w[2] = {load_u32_a2(qs), load_u32_a2(qs + 4)};
    const int shift = (g >> 1) * 4;
    for (int j = 0; j < 8; ++j) {
      const uint32_t q = ((w[j / 4] >> (8 * (j % 4) + shift)) & 0xf) | (((qh >> j) & 1) << 4);
      v[j] = d * int_to_float(q, 16.0f);
    }
  }
};
template <>
struct BlockDecoder<QType::Q5_1> {
  static constexpr int kElems = 32, kBytes = 24, kAlign = 8;
  template <bool kExact>
  __host__ __device__ static void decode(const uint8_t* b, int g, float* v) {
    const uint32_t dm = load_u32(b);
    const float d = half_bits_to_float(uint16_t(dm & 0xffff));
    const float m = half_bits_to_float(uint16_t(dm >> 16));
    const uint32_t qh = load_u32(b + 4) >> (8 * g);
    const uint2 w2 = load_u64(b + 8 + 8 * (g & 1));
    const uint32_t w[2] = {w2.x, w2.y};
    const int shift = (g >> 1) * 4;
    for (int j = 0; j < 8; ++j) {
      const uint32_t q = ((w[j / 4] >> (8 * (j % 4) + shift)) & 0xf) | (((qh >> j) & 1) << 4);
      v[j] = mul_add<kExact>(d, int_to_float(q), m);
    }
  }
};
template <>
struct BlockDecoder<QType::Q8_0> {
  static constexpr int kElems = 32, kBytes = 34, kAlign = 2;
  template <bool kExact>
  __host__ __device__ static void decode(const uint8_t* b, int g, float* v) {
    const float d = half_bits_to_float(load_u16(b));
    const uint8_t* qs = b + 2 + 8 * g;
    const uint32_t w[2] = {load_u32_a2(qs), load_u32_a2(qs + 4)};
    for (int j = 0; j < 8; ++j) {
      // Flipping the sign bit maps int8 q to q + 128 in 0..255.
      const uint32_t biased = ((w[j / 4] >> (8 * (j % 4))) & 0xff) ^ 0x80;
      v[j] = int_to_float(biased, 128.0f) * d;
    }
  }
};
template <>
struct BlockDecoder<QType::IQ4_NL> {
  static constexpr int kElems = 32, kBytes = 18, kAlign = 2;
  template <bool kExact>
  __host__ __device__ static void decode(const uint8_t* b, int g, float* v) {
    const float d = half_bits_to_float(load_u16(b));
    const uint8_t* qs = b + 2 + 8 * (g & 1);
    const uint32_t w[2] = {load_u32_a2(qs), load_u32_a2(qs + 4)};
    const int shift = (g >> 1) * 4;
    for (int j = 0; j < 8; ++j) {
      v[j] = d * float(SLUICE_QTABLE(g_values_iq4nl,
                                     kValuesIq4nl)[(w[j / 4] >> (8 * (j % 4) + shift)) & 0xf]);
    }
  }
};
template <>
struct BlockDecoder<QType::MXFP4> {
  static constexpr int kElems = 32, kBytes = 17, kAlign = 1;
  template <bool kExact>
  __host__ __device__ static void decode(const uint8_t* b, int g, float* v) {
    const float d = e8m0_half(b[0]);
    const uint8_t* qs = b + 1 + 8 * (g & 1);
    const uint32_t w[2] = {load_u32_a1(qs), load_u32_a1(qs + 4)};
    const int shift = (g >> 1) * 4;
    for (int j = 0; j < 8; ++j) {
      v[j] = d * float(SLUICE_QTABLE(g_values_mxfp4,
                                     kValuesMxfp4)[(w[j / 4] >> (8 * (j % 4) + shift)) & 0xf]);
    }
  }
};

// ---- K-quants: 256-element super-blocks, 32 groups -------------------------------------------

template <>
struct BlockDecoder<QType::Q2_K> {
  static constexpr int kElems = 256, kBytes = 84, kAlign = 4;
  template <bool kExact>
  __host__ __device__ static void decode(const uint8_t* b, int g, float* v) {
    const uint32_t dd = load_u32(b + 80);
    const float d = half_bits_to_float(uint16_t(dd & 0xffff));
    const float dmin = half_bits_to_float(uint16_t(dd >> 16));
    const uint32_t sc = b[g / 2];  // one scale byte per 16 elements
    const float dl = d * float(sc & 0xf);
    const float ml = dmin * float(sc >> 4);
    // Elements of half h, plane p, bytes m: (qs[32h + m] >> 2p) & 3.
    const int half = g / 16, plane = (g / 4) % 4;
    const uint8_t* qs = b + 16 + 32 * half + 8 * (g % 4);
    const uint32_t w[2] = {load_u32(qs), load_u32(qs + 4)};
    for (int j = 0; j < 8; ++j) {
      const uint32_t q = (w[j / 4] >> (8 * (j % 4) + 2 * plane)) & 3;
      v[j] = mul_add<kExact>(dl, int_to_float(q), -ml);
    }
  }
};
template <>
struct BlockDecoder<QType::Q3_K> {
  static constexpr int kElems = 256, kBytes = 110, kAlign = 2;
  template <bool kExact>
  __host__ __device__ static void decode(const uint8_t* b, int g, float* v) {
    const float d = half_bits_to_float(load_u16(b + 108));
    const float dl = d * float(q3_k_scale(b + 96, g / 2));  // g / 2: its 16-element sub-block
    const int half = g / 16, plane = (g / 4) % 4, m0 = 8 * (g % 4);
    const uint8_t* qs = b + 32 + 32 * half + m0;
    const uint32_t w[2] = {load_u32_a2(qs), load_u32_a2(qs + 4)};
    const uint32_t hm[2] = {load_u32_a2(b + m0), load_u32_a2(b + m0 + 4)};
    const int hbit = g / 4;  // hmask bit of this 32-element run
    for (int j = 0; j < 8; ++j) {
      const uint32_t lo = (w[j / 4] >> (8 * (j % 4) + 2 * plane)) & 3;
      const uint32_t hi = (hm[j / 4] >> (8 * (j % 4) + hbit)) & 1;  // set: no -4
      v[j] = dl * int_to_float(lo | (hi << 2), 4.0f);
    }
  }
};
template <>
struct BlockDecoder<QType::Q4_K> {
  static constexpr int kElems = 256, kBytes = 144, kAlign = 16;
  template <bool kExact>
  __host__ __device__ static void decode(const uint8_t* b, int g, float* v) {
    const uint32_t dd = load_u32(b);
    const float d = half_bits_to_float(uint16_t(dd & 0xffff));
    const float dmin = half_bits_to_float(uint16_t(dd >> 16));
    const int sub = g / 4;
    uint32_t sc, mn;
    k_scale_min(b + 4, sub, sc, mn);
    const float dl = d * float(sc);
    const float ml = dmin * float(mn);
    const uint2 w2 = load_u64(b + 16 + 32 * (sub / 2) + 8 * (g % 4));
    const uint32_t w[2] = {w2.x, w2.y};
    const int shift = 4 * (sub % 2);
    for (int j = 0; j < 8; ++j) {
      const uint32_t q = (w[j / 4] >> (8 * (j % 4) + shift)) & 0xf;
      v[j] = mul_add<kExact>(dl, int_to_float(q), -ml);
    }
  }
};
template <>
struct BlockDecoder<QType::Q5_K> {
  static constexpr int kElems = 256, kBytes = 176, kAlign = 16;
  template <bool kExact>
  __host__ __device__ static void decode(const uint8_t* b, int g, float* v) {
    const uint32_t dd = load_u32(b);
    const float d = half_bits_to_float(uint16_t(dd & 0xffff));
    const float dmin = half_bits_to_float(uint16_t(dd >> 16));
    const int sub = g / 4, m0 = 8 * (g % 4);
    uint32_t sc, mn;
    k_scale_min(b + 4, sub, sc, mn);
    const float dl = d * float(sc);
    const float ml = dmin * float(mn);
    const uint2 h2 = load_u64(b + 16 + m0);
    const uint32_t h[2] = {h2.x, h2.y};
    const uint2 w2 = load_u64(b + 48 + 32 * (sub / 2) + m0);
    const uint32_t w[2] = {w2.x, w2.y};
    const int shift = 4 * (sub % 2);
    for (int j = 0; j < 8; ++j) {
      const uint32_t q = ((w[j / 4] >> (8 * (j % 4) + shift)) & 0xf) |
                         (((h[j / 4] >> (8 * (j % 4) + sub)) & 1) << 4);
      v[j] = mul_add<kExact>(dl, int_to_float(q), -ml);
    }
  }
};
template <>
struct BlockDecoder<QType::Q6_K> {
  static constexpr int kElems = 256, kBytes = 210, kAlign = 2;
  template <bool kExact>
  __host__ __device__ static void decode(const uint8_t* b, int g, float* v) {
    const float d = half_bits_to_float(load_u16(b + 208));
    const float dl = d * float(int8_t(b[192 + g / 2]));
    const int half = g / 16, r0 = 8 * (g % 16);  // position within the 128-element half
    const uint8_t* ql = b + 64 * half + r0 % 64;
    const uint8_t* qh = b + 128 + 32 * half + r0 % 32;
    const uint32_t lw[2] = {load_u32_a2(ql), load_u32_a2(ql + 4)};
    const uint32_t hw[2] = {load_u32_a2(qh), load_u32_a2(qh + 4)};
    const int lshift = 4 * (r0 / 64), hshift = 2 * (r0 / 32);
    for (int j = 0; j < 8; ++j) {
      const uint32_t q = ((lw[j / 4] >> (8 * (j % 4) + lshift)) & 0xf) |
                         (((hw[j / 4] >> (8 * (j % 4) + hshift)) & 3) << 4);
      v[j] = dl * int_to_float(q, 32.0f);
    }
  }
};

// ---- IQ types --------------------------------------------------------------------------------

// v[j] = db * grid byte j, negated where bit j of `signs` is set (the reference's * +-1).
__host__ __device__ __forceinline__ void grid8(float db, uint64_t row, uint32_t signs, float* v) {
  for (int j = 0; j < 8; ++j) {
    const float x = db * int_to_float(uint32_t(row >> (8 * j)) & 0xff);
    v[j] = (signs >> j) & 1 ? -x : x;
  }
}

template <>
struct BlockDecoder<QType::IQ2_XXS> {
  static constexpr int kElems = 256, kBytes = 66, kAlign = 2;
  template <bool kExact>
  __host__ __device__ static void decode(const uint8_t* b, int g, float* v) {
    const float d = half_bits_to_float(load_u16(b));
    const int ib = g / 4, l = g % 4;
    const uint8_t index = b[2 + 8 * ib + l];
    const uint32_t signs_scale = load_u32_a2(b + 2 + 8 * ib + 4);
    const float db = d * (0.5f + float(signs_scale >> 28)) * 0.25f;
    grid8(db, SLUICE_QTABLE(g_iq2xxs_grid, kIq2xxsGrid)[index],
          SLUICE_QTABLE(g_ksigns_iq2xs, kKsignsIq2xs)[(signs_scale >> (7 * l)) & 127], v);
  }
};
template <>
struct BlockDecoder<QType::IQ2_XS> {
  static constexpr int kElems = 256, kBytes = 74, kAlign = 2;
  template <bool kExact>
  __host__ __device__ static void decode(const uint8_t* b, int g, float* v) {
    const float d = half_bits_to_float(load_u16(b));
    const int ib = g / 4, l = g % 4;
    const uint16_t q = load_u16(b + 2 + 2 * g);
    const uint8_t sc = b[66 + ib];
    const float db = d * (0.5f + float((sc >> (4 * (l / 2))) & 0xf)) * 0.25f;
    grid8(db, SLUICE_QTABLE(g_iq2xs_grid, kIq2xsGrid)[q & 511],
          SLUICE_QTABLE(g_ksigns_iq2xs, kKsignsIq2xs)[q >> 9], v);
  }
};
template <>
struct BlockDecoder<QType::IQ2_S> {
  static constexpr int kElems = 256, kBytes = 82, kAlign = 2;
  template <bool kExact>
  __host__ __device__ static void decode(const uint8_t* b, int g, float* v) {
    const float d = half_bits_to_float(load_u16(b));
    const int ib = g / 4, l = g % 4;
    const int index = b[2 + g] | (((b[66 + ib] >> (2 * l)) & 3) << 8);
    const uint8_t signs = b[2 + 32 + g];
    const uint8_t sc = b[74 + ib];
    const float db = d * (0.5f + float((sc >> (4 * (l / 2))) & 0xf)) * 0.25f;
    grid8(db, SLUICE_QTABLE(g_iq2s_grid, kIq2sGrid)[index], signs, v);
  }
};
template <>
struct BlockDecoder<QType::IQ3_XXS> {
  static constexpr int kElems = 256, kBytes = 98, kAlign = 2;
  template <bool kExact>
  __host__ __device__ static void decode(const uint8_t* b, int g, float* v) {
    const float d = half_bits_to_float(load_u16(b));
    const int ib = g / 4, l = g % 4;
    const uint32_t aux = load_u32_a2(b + 2 + 64 + 4 * ib);
    const float db = d * (0.5f + float(aux >> 28)) * 0.5f;
    const uint32_t row0 = SLUICE_QTABLE(g_iq3xxs_grid, kIq3xxsGrid)[b[2 + 8 * ib + 2 * l]];
    const uint32_t row1 = SLUICE_QTABLE(g_iq3xxs_grid, kIq3xxsGrid)[b[2 + 8 * ib + 2 * l + 1]];
    grid8(db, uint64_t(row0) | (uint64_t(row1) << 32),
          SLUICE_QTABLE(g_ksigns_iq2xs, kKsignsIq2xs)[(aux >> (7 * l)) & 127], v);
  }
};
template <>
struct BlockDecoder<QType::IQ3_S> {
  static constexpr int kElems = 256, kBytes = 110, kAlign = 2;
  template <bool kExact>
  __host__ __device__ static void decode(const uint8_t* b, int g, float* v) {
    const float d = half_bits_to_float(load_u16(b));
    const int sub = g / 4;
    const float db = d * float(1 + 2 * ((b[106 + sub / 2] >> (4 * (sub % 2))) & 0xf));
    const uint8_t qh = b[66 + g / 4];  // bit r % 8 for grid row r = 2g, 2g + 1
    const int r0 = 2 * g;
    const int i0 = b[2 + r0] | (((qh >> (r0 % 8)) & 1) << 8);
    const int i1 = b[2 + r0 + 1] | (((qh >> ((r0 + 1) % 8)) & 1) << 8);
    const uint64_t row = uint64_t(SLUICE_QTABLE(g_iq3s_grid, kIq3sGrid)[i0]) |
                         (uint64_t(SLUICE_QTABLE(g_iq3s_grid, kIq3sGrid)[i1]) << 32);
    grid8(db, row, b[74 + g], v);
  }
};
template <>
struct BlockDecoder<QType::IQ1_S> {
  static constexpr int kElems = 256, kBytes = 50, kAlign = 2;
  template <bool kExact>
  __host__ __device__ static void decode(const uint8_t* b, int g, float* v) {
    const float d = half_bits_to_float(load_u16(b));
    const int ib = g / 4, l = g % 4;
    const uint16_t qh = load_u16(b + 34 + 2 * ib);
    const float dl = d * float(2 * ((qh >> 12) & 7) + 1);
    const float delta = (qh & 0x8000) ? -kIq1sDelta : kIq1sDelta;
    const uint64_t row =
        SLUICE_QTABLE(g_iq1s_grid, kIq1sGrid)[b[2 + g] | (((qh >> (3 * l)) & 7) << 8)];
    for (int j = 0; j < 8; ++j) {
      const uint32_t biased = (uint32_t(row >> (8 * j)) & 0xff) ^ 0x80;  // int8 + 128
      v[j] = dl * (int_to_float(biased, 128.0f) + delta);
    }
  }
};
template <>
struct BlockDecoder<QType::IQ1_M> {
  static constexpr int kElems = 256, kBytes = 56, kAlign = 8;
  template <bool kExact>
  __host__ __device__ static void decode(const uint8_t* b, int g, float* v) {
    const uint8_t* s = b + 48;
    const uint16_t sc[4] = {load_u16(s), load_u16(s + 2), load_u16(s + 4), load_u16(s + 6)};
    const uint16_t d_bits = uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                     ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
    const float d = half_bits_to_float(d_bits);
    const int ib = g / 4, l = g % 4;
    const int shift = 6 * (ib % 2) + 3 * (l / 2);
    const float dl = d * float(2 * ((sc[ib / 2] >> shift) & 7) + 1);
    const int nib = (b[32 + 2 * ib + l / 2] >> (4 * (l % 2))) & 0xf;
    const uint64_t row = SLUICE_QTABLE(g_iq1s_grid, kIq1sGrid)[b[g] | ((nib & 7) << 8)];
    const float delta = (nib & 8) ? -kIq1mDelta : kIq1mDelta;
    for (int j = 0; j < 8; ++j) {
      const uint32_t biased = (uint32_t(row >> (8 * j)) & 0xff) ^ 0x80;
      v[j] = dl * (int_to_float(biased, 128.0f) + delta);
    }
  }
};
template <>
struct BlockDecoder<QType::IQ4_XS> {
  static constexpr int kElems = 256, kBytes = 136, kAlign = 8;
  template <bool kExact>
  __host__ __device__ static void decode(const uint8_t* b, int g, float* v) {
    const float d = half_bits_to_float(load_u16(b));
    const uint16_t scales_h = load_u16(b + 2);
    const int ib = g / 4;
    const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xf) | (((scales_h >> (2 * ib)) & 3) << 4);
    const float dl = d * float(ls - 32);
    const uint2 w2 = load_u64(b + 8 + 16 * ib + 8 * (g % 2));
    const uint32_t w[2] = {w2.x, w2.y};
    const int shift = 4 * ((g % 4) / 2);
    for (int j = 0; j < 8; ++j) {
      v[j] = dl * float(SLUICE_QTABLE(g_values_iq4nl,
                                      kValuesIq4nl)[(w[j / 4] >> (8 * (j % 4) + shift)) & 0xf]);
    }
  }
};

}  // namespace sluice::cuda::quant
