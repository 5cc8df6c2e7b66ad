// The int8 decode pieces of the remaining weight types (quant_int8_matvec.cuh holds the kernels,
// the activation quantizers and the first six types). Each follows quant/dot_reference*.cpp:
// integer sums per 16-32 elements against the CPU-quantized activations, the same scales, so
// the result differs from the reference only in the order of float additions.
//
// 256-element types whose blocks are only 2-byte aligned (Q3_K and the IQ grids): lane L takes
// piece L % 8 of super-block 4i + L / 8 as in quant_int8_matvec.cuh; for the IQ types the piece
// is one 32-element sub-block, for Q3_K it is Q2_K's split (8 qs bytes of each plane).
// 32-element types (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q8_0): `Block32<type>` unpacks one
// block from the warp's shared-memory stage (staged32_matvec_kernel) into 32 int8 values.
//
// Grid types: a grid row holds 8 (IQ2) or 4 (IQ3) unsigned bytes; a sign bit per element
// negates it, done 4 bytes at a time as (v ^ m) - m with m = 0xff in the negated bytes.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/quant_decode.cuh"
#include "backend/cuda/quant_int8_matvec.cuh"
#include "backend/cuda/quant_tables.cuh"

namespace sluice::cuda::quant {
namespace {

__device__ __forceinline__ uint32_t ldg_u16(const uint8_t* p) {  // p 2-byte aligned
  return __ldg(reinterpret_cast<const uint16_t*>(p));
}
__device__ __forceinline__ uint32_t ldg_u32_a2(const uint8_t* p) {  // p 2-byte aligned
  return ldg_u16(p) | (ldg_u16(p + 2) << 16);
}
__device__ __forceinline__ float ldg_half(const uint8_t* p) {
  return __half2float(__ushort_as_half(uint16_t(ldg_u16(p))));
}

// Bits 0..3 of `bits` as byte masks (0x00 or 0xff per byte): the four shifted copies of the
// nibble do not overlap, so the multiply has no carries.
__device__ __forceinline__ uint32_t byte_mask4(uint32_t bits) {
  return (((bits & 0xfu) * 0x00204081u) & 0x01010101u) * 0xffu;
}
__device__ __forceinline__ uint32_t negate_masked(uint32_t v, uint32_t mask) {
  return __vsub4(v ^ mask, mask);
}
// kKsignsIq2xs[i]: the 7 stored sign bits and an eighth that makes the count of negatives even.
__device__ __forceinline__ uint32_t ksigns(uint32_t seven) {
  return seven | ((__popc(seven) & 1u) << 7);
}
// An 8-wide grid row with 8 sign bits, as two words of int8.
__device__ __forceinline__ void signed_row8(uint64_t row, uint32_t signs, uint32_t* out) {
  out[0] = negate_masked(uint32_t(row), byte_mask4(signs));
  out[1] = negate_masked(uint32_t(row >> 32), byte_mask4(signs >> 4));
}
__device__ __forceinline__ int dot2(const uint32_t* w, int2 a, int acc) {
  return __dp4a(int(w[1]), a.y, __dp4a(int(w[0]), a.x, acc));
}
__device__ __forceinline__ int4 load_act32(const QuantizedRows& q, int t, int64_t n_cols,
                                           int64_t block, int offset, int half) {
  return __ldg(reinterpret_cast<const int4*>(q.qs + t * n_cols + block * 256 + offset) + half);
}

// Q3_K (110 bytes): hmask [32], qs [64], scales [12] (16 six-bit scales biased by 32), d.
// Element 128 h + 32 p + j: low bits (qs[32 h + j] >> 2p) & 3, minus 4 unless bit 4h + p of
// hmask[j] is set. Piece 4h + k: qs and hmask bytes 8k .. 8k + 7 of half h, all four planes.
template <int kTokens>
struct Int8Piece<QType::Q3_K, kTokens> {
  static constexpr int kBytes = 110;
  __device__ static void run(const uint8_t* b, int piece, const QuantizedRows& q, int64_t n_cols,
                             int64_t block, float* acc) {
    const int h = piece / 4, k = piece % 4;
    const uint32_t q0 = ldg_u32_a2(b + 32 + 32 * h + 8 * k),
                   q1 = ldg_u32_a2(b + 36 + 32 * h + 8 * k);
    const uint32_t m0 = ldg_u32_a2(b + 8 * k), m1 = ldg_u32_a2(b + 8 * k + 4);
    const float d = ldg_half(b + 108);
    uint32_t v[4][2];
    int sc[4];
    for (int p = 0; p < 4; ++p) {
      const int bit = 4 * h + p;
      v[p][0] = __vsub4(((q0 >> (2 * p)) & 0x03030303u) | (((m0 >> bit) & 0x01010101u) << 2),
                        0x04040404u);
      v[p][1] = __vsub4(((q1 >> (2 * p)) & 0x03030303u) | (((m1 >> bit) & 0x01010101u) << 2),
                        0x04040404u);
      const int s = 8 * h + 2 * p + k / 2;  // 16-element scale index
      const int low = (__ldg(b + 96 + s % 8) >> (4 * (s / 8))) & 0xf;
      const int high = (__ldg(b + 104 + s % 4) >> (2 * (s / 4))) & 3;
      sc[p] = (low | (high << 4)) - 32;
    }
    const int64_t nb = n_cols / 256;
    for (int t = 0; t < kTokens; ++t) {
      const int8_t* xq = q.qs + t * n_cols + block * 256 + 128 * h + 8 * k;
      int isum = 0;
      for (int p = 0; p < 4; ++p) {
        isum += sc[p] * dot2(v[p], __ldg(reinterpret_cast<const int2*>(xq + 32 * p)), 0);
      }
      acc[t] += __fmul_rn(d, __ldg(q.d + t * nb + block)) * float(isum);
    }
  }
};

// The IQ grid types' shared tail: 32 int8 weights w (elements 0..15 in w[0..3], 16..31 in
// w[4..7]) of sub-block ib, scales per 16 (s0, s1), times d * dx * factor.
template <int kTokens>
__device__ __forceinline__ void grid_sub_block(const uint32_t (&w)[8], int ib, int s0, int s1,
                                               float d_factor, const QuantizedRows& q,
                                               int64_t n_cols, int64_t block, float* acc) {
  const uint32_t lo[4] = {w[0], w[1], w[2], w[3]}, hi[4] = {w[4], w[5], w[6], w[7]};
  const int64_t nb = n_cols / 256;
  for (int t = 0; t < kTokens; ++t) {
    const int isum = s0 * dot4x4(lo, load_act32(q, t, n_cols, block, 32 * ib, 0), 0) +
                     s1 * dot4x4(hi, load_act32(q, t, n_cols, block, 32 * ib, 1), 0);
    acc[t] += __fmul_rn(d_factor, __ldg(q.d + t * nb + block)) * float(isum);
  }
}

// A grid type's piece: its sub-block decoded (Piece::decode), then the shared tail.
template <class Piece, int kTokens>
__device__ __forceinline__ void run_grid_piece(const uint8_t* b, int ib, const QuantizedRows& q,
                                               int64_t n_cols, int64_t block, float* acc) {
  uint32_t w[8];
  int s0, s1;
  Piece::decode(b, ib, w, s0, s1);
  grid_sub_block<kTokens>(w, ib, s0, s1, Piece::block_d(b) * Piece::kFactor, q, n_cols, block, acc);
}

// The grid types' pieces also decode a sub-block apart (decode: its 32 signed integer weights,
// elements 0..15 in w[0..3], and the scales of its two halves; block_d and kFactor the block's
// scale and the reference's final factor). The IQ2 / IQ3 ones run on it (run_grid_piece); the
// IQ1 ones' decode gives the CPU kernel's 8 g + delta for --cpu-rounding's CPU-order kernels
// (quant_int8_cpu_order.cuh), while their own run keeps the delta apart.

// IQ2_XXS (66 bytes): d, then per 32 elements 4 grid indices and a word of four 7-bit sign
// indices plus a 4-bit scale; the reference multiplies the sum by 1/8.
template <int kTokens>
struct Int8Piece<QType::IQ2_XXS, kTokens> {
  static constexpr int kBytes = 66;
  static constexpr float kFactor = 0.125f;
  __device__ static float block_d(const uint8_t* b) { return ldg_half(b); }
  __device__ static void decode(const uint8_t* b, int ib, uint32_t (&w)[8], int& s0, int& s1) {
    const uint32_t aux0 = ldg_u32_a2(b + 2 + 8 * ib), aux1 = ldg_u32_a2(b + 6 + 8 * ib);
    for (int l = 0; l < 4; ++l) {
      signed_row8(__ldg(g_iq2xxs_grid + ((aux0 >> (8 * l)) & 0xff)),
                  ksigns((aux1 >> (7 * l)) & 127), w + 2 * l);
    }
    s0 = s1 = 2 * int(aux1 >> 28) + 1;
  }
  __device__ static void run(const uint8_t* b, int ib, const QuantizedRows& q, int64_t n_cols,
                             int64_t block, float* acc) {
    run_grid_piece<Int8Piece, kTokens>(b, ib, q, n_cols, block, acc);
  }
};

// IQ2_XS (74 bytes): d, 32 uint16 (9-bit grid index, 7-bit sign index), a nibble scale per 16.
template <int kTokens>
struct Int8Piece<QType::IQ2_XS, kTokens> {
  static constexpr int kBytes = 74;
  static constexpr float kFactor = 0.125f;
  __device__ static float block_d(const uint8_t* b) { return ldg_half(b); }
  __device__ static void decode(const uint8_t* b, int ib, uint32_t (&w)[8], int& s0, int& s1) {
    for (int l = 0; l < 4; ++l) {
      const uint32_t v = ldg_u16(b + 2 + 8 * ib + 2 * l);
      signed_row8(__ldg(g_iq2xs_grid + (v & 511)), ksigns(v >> 9), w + 2 * l);
    }
    const uint32_t sc = __ldg(b + 66 + ib);
    s0 = 2 * int(sc & 0xf) + 1;
    s1 = 2 * int(sc >> 4) + 1;
  }
  __device__ static void run(const uint8_t* b, int ib, const QuantizedRows& q, int64_t n_cols,
                             int64_t block, float* acc) {
    run_grid_piece<Int8Piece, kTokens>(b, ib, q, n_cols, block, acc);
  }
};

// IQ2_S (82 bytes): d, 32 index bytes, 32 sign bytes, qh [8] (2 high index bits per 8),
// scales [8] (a nibble per 16).
template <int kTokens>
struct Int8Piece<QType::IQ2_S, kTokens> {
  static constexpr int kBytes = 82;
  static constexpr float kFactor = 0.125f;
  __device__ static float block_d(const uint8_t* b) { return ldg_half(b); }
  __device__ static void decode(const uint8_t* b, int ib, uint32_t (&w)[8], int& s0, int& s1) {
    const uint32_t idx = ldg_u32_a2(b + 2 + 4 * ib), signs = ldg_u32_a2(b + 34 + 4 * ib);
    const uint32_t qh = __ldg(b + 66 + ib);
    for (int l = 0; l < 4; ++l) {
      const uint32_t index = ((idx >> (8 * l)) & 0xff) | (((qh >> (2 * l)) & 3) << 8);
      signed_row8(__ldg(g_iq2s_grid + index), (signs >> (8 * l)) & 0xff, w + 2 * l);
    }
    const uint32_t sc = __ldg(b + 74 + ib);
    s0 = 2 * int(sc & 0xf) + 1;
    s1 = 2 * int(sc >> 4) + 1;
  }
  __device__ static void run(const uint8_t* b, int ib, const QuantizedRows& q, int64_t n_cols,
                             int64_t block, float* acc) {
    run_grid_piece<Int8Piece, kTokens>(b, ib, q, n_cols, block, acc);
  }
};

// IQ3_XXS (98 bytes): d, 64 grid bytes (4-wide rows), then per 32 elements a word of four
// 7-bit sign indices and a 4-bit scale; the reference multiplies the sum by 1/4.
template <int kTokens>
struct Int8Piece<QType::IQ3_XXS, kTokens> {
  static constexpr int kBytes = 98;
  static constexpr float kFactor = 0.25f;
  __device__ static float block_d(const uint8_t* b) { return ldg_half(b); }
  __device__ static void run(const uint8_t* b, int ib, const QuantizedRows& q, int64_t n_cols,
                             int64_t block, float* acc) {
    run_grid_piece<Int8Piece, kTokens>(b, ib, q, n_cols, block, acc);
  }
  __device__ static void decode(const uint8_t* b, int ib, uint32_t (&w)[8], int& s0, int& s1) {
    const uint32_t i0 = ldg_u32_a2(b + 2 + 8 * ib), i1 = ldg_u32_a2(b + 6 + 8 * ib);
    const uint32_t aux = ldg_u32_a2(b + 66 + 4 * ib);
    for (int l = 0; l < 4; ++l) {
      const uint32_t idx = l < 2 ? i0 : i1;
      const int shift = 16 * (l % 2);
      const uint32_t s = ksigns((aux >> (7 * l)) & 127);
      w[2 * l] = negate_masked(__ldg(g_iq3xxs_grid + ((idx >> shift) & 0xff)), byte_mask4(s));
      w[2 * l + 1] =
          negate_masked(__ldg(g_iq3xxs_grid + ((idx >> (shift + 8)) & 0xff)), byte_mask4(s >> 4));
    }
    s0 = s1 = 2 * int(aux >> 28) + 1;
  }
};

// IQ3_S (110 bytes): d, qs [64] (low 8 index bits), qh [8] (ninth bits), signs [32],
// scales [4] (a nibble per 32).
template <int kTokens>
struct Int8Piece<QType::IQ3_S, kTokens> {
  static constexpr int kBytes = 110;
  static constexpr float kFactor = 1.0f;
  __device__ static float block_d(const uint8_t* b) { return ldg_half(b); }
  __device__ static void decode(const uint8_t* b, int ib, uint32_t (&w)[8], int& s0, int& s1) {
    const uint32_t i0 = ldg_u32_a2(b + 2 + 8 * ib), i1 = ldg_u32_a2(b + 6 + 8 * ib);
    const uint32_t qh = __ldg(b + 66 + ib);
    const uint32_t signs = ldg_u32_a2(b + 74 + 4 * ib);
    for (int r = 0; r < 8; ++r) {  // grid row r: elements 4r .. 4r + 3
      const uint32_t idx = r < 4 ? i0 : i1;
      const uint32_t index = ((idx >> (8 * (r % 4))) & 0xff) | (((qh >> r) & 1) << 8);
      w[r] = negate_masked(__ldg(g_iq3s_grid + index), byte_mask4(signs >> (4 * r)));
    }
    s0 = s1 = 2 * int((__ldg(b + 106 + ib / 2) >> (4 * (ib % 2))) & 0xf) + 1;
  }
  __device__ static void run(const uint8_t* b, int ib, const QuantizedRows& q, int64_t n_cols,
                             int64_t block, float* acc) {
    run_grid_piece<Int8Piece, kTokens>(b, ib, q, n_cols, block, acc);
  }
};

// Four IQ1 grid bytes g (-1, 0 or 1) as 8 g + delta bytewise (delta: 0x01 or 0xff per byte);
// -9..9 never carries across bytes once computed per byte.
__device__ __forceinline__ uint32_t iq1_folded(uint32_t grid, uint32_t delta) {
  return __vadd4(__vadd4(__vadd4(__vadd4(grid, grid), __vadd4(grid, grid)),
                         __vadd4(__vadd4(grid, grid), __vadd4(grid, grid))),
                 delta);
}

// IQ1_S (50 bytes): d, qs [32] (low 8 of 11 index bits), qh uint16 [8]: 3 index bits per 8
// elements, a 3-bit scale and the delta's sign. The grid holds int8 -1/0/1; the delta term
// uses the activation sums (Q8_K's bsums).
template <int kTokens>
struct Int8Piece<QType::IQ1_S, kTokens> {
  static constexpr int kBytes = 50;
  // For the CPU-order kernels: the CPU's AVX2 weights 8 g + delta (-9..9; kIq1sDelta = 1/8),
  // so that d * kFactor * scale * sum(w x) is the product.
  static constexpr float kFactor = 0.125f;
  __device__ static float block_d(const uint8_t* b) { return ldg_half(b); }
  __device__ static void decode(const uint8_t* b, int ib, uint32_t (&w)[8], int& s0, int& s1) {
    const uint32_t idx = ldg_u32_a2(b + 2 + 4 * ib);
    const uint32_t qh = ldg_u16(b + 34 + 2 * ib);
    const uint32_t delta = (qh & 0x8000) ? 0xffffffffu : 0x01010101u;
    for (int l = 0; l < 4; ++l) {
      const uint64_t row =
          __ldg(g_iq1s_grid + (((idx >> (8 * l)) & 0xff) | (((qh >> (3 * l)) & 7) << 8)));
      w[2 * l] = iq1_folded(uint32_t(row), delta);
      w[2 * l + 1] = iq1_folded(uint32_t(row >> 32), delta);
    }
    s0 = s1 = 2 * int((qh >> 12) & 7) + 1;
  }
  __device__ static void run(const uint8_t* b, int ib, const QuantizedRows& q, int64_t n_cols,
                             int64_t block, float* acc) {
    const uint32_t idx = ldg_u32_a2(b + 2 + 4 * ib);
    const uint32_t qh = ldg_u16(b + 34 + 2 * ib);
    uint32_t w[8];
    for (int l = 0; l < 4; ++l) {
      const uint64_t row =
          __ldg(g_iq1s_grid + (((idx >> (8 * l)) & 0xff) | (((qh >> (3 * l)) & 7) << 8)));
      w[2 * l] = uint32_t(row), w[2 * l + 1] = uint32_t(row >> 32);
    }
    const int scale = 2 * int((qh >> 12) & 7) + 1;
    const float delta = (qh & 0x8000) ? -kIq1sDelta : kIq1sDelta;
    const uint32_t lo[4] = {w[0], w[1], w[2], w[3]}, hi[4] = {w[4], w[5], w[6], w[7]};
    const float d = ldg_half(b);
    const int64_t nb = n_cols / 256;
    for (int t = 0; t < kTokens; ++t) {
      const int4 a0 = load_act32(q, t, n_cols, block, 32 * ib, 0);
      const int4 a1 = load_act32(q, t, n_cols, block, 32 * ib, 1);
      const int isum = dot4x4(hi, a1, dot4x4(lo, a0, 0));
      const int16_t* bs = q.bsums + (t * nb + block) * 16 + 2 * ib;
      const int bsum = int(__ldg(bs)) + int(__ldg(bs + 1));
      acc[t] += __fmul_rn(d, __ldg(q.d + t * nb + block)) * float(scale) *
                (float(isum) + delta * float(bsum));
    }
  }
};

// IQ1_M (56 bytes, 8-byte aligned): qs [32], qh [16] (per 8 elements 3 index bits and the
// delta's sign), scales: four uint16 holding 3-bit scales per 16 and, in their top nibbles,
// the block's f16 scale.
template <int kTokens>
struct Int8Piece<QType::IQ1_M, kTokens> {
  static constexpr int kBytes = 56;
  // For the CPU-order kernels, as IQ1_S's: 8 g + delta per 8 elements (kIq1mDelta = 1/8).
  static constexpr float kFactor = 0.125f;
  __device__ static float block_d(const uint8_t* b) {
    const uint2 scw = __ldg(reinterpret_cast<const uint2*>(b + 48));
    const uint32_t sc[4] = {scw.x & 0xffff, scw.x >> 16, scw.y & 0xffff, scw.y >> 16};
    return __half2float(__ushort_as_half(uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                                  ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000))));
  }
  __device__ static void decode(const uint8_t* b, int ib, uint32_t (&w)[8], int& s0, int& s1) {
    const uint32_t idx = __ldg(reinterpret_cast<const uint32_t*>(b + 4 * ib));
    const uint32_t qh = ldg_u16(b + 32 + 2 * ib);
    const uint32_t sc = ldg_u16(b + 48 + 2 * (ib / 2));
    for (int l = 0; l < 4; ++l) {
      const uint32_t nib = (qh >> (4 * l)) & 0xf;
      const uint64_t row = __ldg(g_iq1s_grid + (((idx >> (8 * l)) & 0xff) | ((nib & 7) << 8)));
      const uint32_t delta = (nib & 8) ? 0xffffffffu : 0x01010101u;
      w[2 * l] = iq1_folded(uint32_t(row), delta);
      w[2 * l + 1] = iq1_folded(uint32_t(row >> 32), delta);
    }
    s0 = 2 * int((sc >> (6 * (ib % 2))) & 7) + 1;
    s1 = 2 * int((sc >> (6 * (ib % 2) + 3)) & 7) + 1;
  }
  __device__ static void run(const uint8_t* b, int ib, const QuantizedRows& q, int64_t n_cols,
                             int64_t block, float* acc) {
    const uint32_t idx = __ldg(reinterpret_cast<const uint32_t*>(b + 4 * ib));
    const uint32_t qh = ldg_u16(b + 32 + 2 * ib);
    const uint2 scw = __ldg(reinterpret_cast<const uint2*>(b + 48));
    const uint32_t sc[4] = {scw.x & 0xffff, scw.x >> 16, scw.y & 0xffff, scw.y >> 16};
    const uint16_t d_bits = uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                     ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
    const float d = __half2float(__ushort_as_half(d_bits));
    const int s1 = 2 * int((sc[ib / 2] >> (6 * (ib % 2))) & 7) + 1;
    const int s2 = 2 * int((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 7) + 1;
    uint32_t w[8];
    int delta_sign[4];
    for (int l = 0; l < 4; ++l) {
      const uint32_t nib = (qh >> (4 * l)) & 0xf;  // byte l/2, low nibble for even l
      const uint64_t row = __ldg(g_iq1s_grid + (((idx >> (8 * l)) & 0xff) | ((nib & 7) << 8)));
      w[2 * l] = uint32_t(row), w[2 * l + 1] = uint32_t(row >> 32);
      delta_sign[l] = (nib & 8) ? -1 : 1;
    }
    const int64_t nb = n_cols / 256;
    for (int t = 0; t < kTokens; ++t) {
      const int4 a0 = load_act32(q, t, n_cols, block, 32 * ib, 0);
      const int4 a1 = load_act32(q, t, n_cols, block, 32 * ib, 1);
      const int2 a[4] = {make_int2(a0.x, a0.y), make_int2(a0.z, a0.w), make_int2(a1.x, a1.y),
                         make_int2(a1.z, a1.w)};
      int isum = 0, idelta = 0;
      for (int l = 0; l < 4; ++l) {
        const int scale = l < 2 ? s1 : s2;
        isum += scale * dot2(w + 2 * l, a[l], 0);
        idelta += scale * delta_sign[l] * __dp4a(0x01010101, a[l].y, __dp4a(0x01010101, a[l].x, 0));
      }
      acc[t] +=
          __fmul_rn(d, __ldg(q.d + t * nb + block)) * (float(isum) + kIq1mDelta * float(idelta));
    }
  }
};

// ---- 32-element blocks, unpacked from the warp's shared-memory stage -----------------------
// `words` is the stage as 32-bit words, `o` the block's byte offset in it (any alignment).
template <int N>
__device__ __forceinline__ void stage_bytes(const uint32_t* words, int o, uint32_t (&out)[N]) {
  const int base = o / 4, shift = 8 * (o % 4);
  uint32_t raw[N + 1];
  for (int k = 0; k <= N; ++k) raw[k] = words[base + k];
  for (int k = 0; k < N; ++k) out[k] = __funnelshift_r(raw[k], raw[k + 1], shift);
}
__device__ __forceinline__ uint32_t stage_word(const uint32_t* words, int o) {
  uint32_t w[1];
  stage_bytes(words, o, w);
  return w[0];
}
__device__ __forceinline__ float half_lo(uint32_t w) {
  return __half2float(__ushort_as_half(uint16_t(w & 0xffff)));
}
__device__ __forceinline__ float half_hi(uint32_t w) {
  return __half2float(__ushort_as_half(uint16_t(w >> 16)));
}

// unpack: lo = int8 elements 0..15, hi = 16..31, d the weight scale, m the minimum (Q4_1 /
// Q5_1, paired with Q8_1's s = d_x * sum(x_q)).
template <QType kType>
struct Block32;

template <>
struct Block32<QType::Q8_0> {
  static constexpr int kBytes = 34;
  __device__ static void unpack(const uint32_t* words, int o, uint32_t (&lo)[4], uint32_t (&hi)[4],
                                float& d, float&) {
    uint32_t qs[8];
    stage_bytes(words, o + 2, qs);
    d = half_lo(stage_word(words, o));
    for (int k = 0; k < 4; ++k) lo[k] = qs[k], hi[k] = qs[k + 4];
  }
};
template <>
struct Block32<QType::Q4_0> {
  static constexpr int kBytes = 18;
  __device__ static void unpack(const uint32_t* words, int o, uint32_t (&lo)[4], uint32_t (&hi)[4],
                                float& d, float&) {
    uint32_t qs[4];
    stage_bytes(words, o + 2, qs);
    d = half_lo(stage_word(words, o));
    for (int k = 0; k < 4; ++k) {
      lo[k] = __vsub4(qs[k] & 0x0f0f0f0fu, 0x08080808u);
      hi[k] = __vsub4((qs[k] >> 4) & 0x0f0f0f0fu, 0x08080808u);
    }
  }
};
template <>
struct Block32<QType::Q4_1> {
  static constexpr int kBytes = 20;
  __device__ static void unpack(const uint32_t* words, int o, uint32_t (&lo)[4], uint32_t (&hi)[4],
                                float& d, float& m) {
    uint32_t qs[4];
    stage_bytes(words, o + 4, qs);
    const uint32_t dm = stage_word(words, o);
    d = half_lo(dm), m = half_hi(dm);
    for (int k = 0; k < 4; ++k) lo[k] = qs[k] & 0x0f0f0f0fu, hi[k] = (qs[k] >> 4) & 0x0f0f0f0fu;
  }
};
// Q5_0 / Q5_1: bit j of qh is the fifth bit of element j.
__device__ __forceinline__ void fifth_bits(const uint32_t (&qs)[4], uint32_t qh, uint32_t (&lo)[4],
                                           uint32_t (&hi)[4]) {
  for (int k = 0; k < 4; ++k) {
    lo[k] = (qs[k] & 0x0f0f0f0fu) | ((byte_mask4(qh >> (4 * k)) & 0x01010101u) << 4);
    hi[k] = ((qs[k] >> 4) & 0x0f0f0f0fu) | ((byte_mask4(qh >> (16 + 4 * k)) & 0x01010101u) << 4);
  }
}
template <>
struct Block32<QType::Q5_0> {
  static constexpr int kBytes = 22;
  __device__ static void unpack(const uint32_t* words, int o, uint32_t (&lo)[4], uint32_t (&hi)[4],
                                float& d, float&) {
    uint32_t qs[4];
    stage_bytes(words, o + 6, qs);
    d = half_lo(stage_word(words, o));
    fifth_bits(qs, stage_word(words, o + 2), lo, hi);
    for (int k = 0; k < 4; ++k)
      lo[k] = __vsub4(lo[k], 0x10101010u), hi[k] = __vsub4(hi[k], 0x10101010u);
  }
};
template <>
struct Block32<QType::Q5_1> {
  static constexpr int kBytes = 24;
  __device__ static void unpack(const uint32_t* words, int o, uint32_t (&lo)[4], uint32_t (&hi)[4],
                                float& d, float& m) {
    uint32_t qs[4];
    stage_bytes(words, o + 8, qs);
    const uint32_t dm = stage_word(words, o);
    d = half_lo(dm), m = half_hi(dm);
    fifth_bits(qs, stage_word(words, o + 4), lo, hi);
  }
};
template <>
struct Block32<QType::IQ4_NL> {
  static constexpr int kBytes = 18;
  __device__ static void unpack(const uint32_t* words, int o, uint32_t (&lo)[4], uint32_t (&hi)[4],
                                float& d, float&) {
    uint32_t qs[4];
    stage_bytes(words, o + 2, qs);
    d = half_lo(stage_word(words, o));
    for (int k = 0; k < 4; ++k) {
      const int2 v = iq4nl_lookup(qs[k]);
      lo[k] = uint32_t(v.x), hi[k] = uint32_t(v.y);
    }
  }
};
template <>
struct Block32<QType::MXFP4> {
  static constexpr int kBytes = 17;
  __device__ static void unpack(const uint32_t* words, int o, uint32_t (&lo)[4], uint32_t (&hi)[4],
                                float& d, float&) {
    uint32_t qs[4];
    stage_bytes(words, o + 1, qs);
    d = e8m0_half(uint8_t(stage_word(words, o) & 0xff));
    for (int k = 0; k < 4; ++k) {
      const int2 v = mxfp4_lookup(qs[k]);
      lo[k] = uint32_t(v.x), hi[k] = uint32_t(v.y);
    }
  }
};

}  // namespace
}  // namespace sluice::cuda::quant
