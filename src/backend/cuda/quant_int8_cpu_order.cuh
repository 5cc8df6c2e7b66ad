// Internal to backend/cuda (included by quant_int8_matvec.cuh): the decode products of every
// weight type under --cpu-rounding, in the float order of the CPU backend's kernels, so that
// every output is the CPU's bit for bit (cpu_order.h). Integer sums of 4 products are exact in
// any order; only the float operations are replayed. The 32-element types:
//   AVX-512 (backend/cpu/vec_dot_q_avx512.cpp): 16 accumulator lanes, blocks in pairs — lane l
//     holds elements 4(l % 8) .. +3 of block 2i + l / 8 — each step acc = fma(isum, dw * dx,
//     acc), a lone last block's partner lanes fma(0, 0, acc); then GCC's _mm512_reduce_add_ps
//     (lanes l + l^8, then ^4, ^2, ^1).
//   AVX2 (vec_dot_q_avx2.cpp): 8 lanes, one block per step, lane l holds elements 4l .. +3; one
//     accumulator, or two alternating by block for IQ4_NL and MXFP4, added lane-wise; then
//     hsum_ps (l + l^4, ^2, ^1).
//   Q4_1 / Q5_1: sum_min += m * s block by block (a product rounded, then the sum), added last.
// One warp per row, the warp's blocks staged in shared memory as staged32_matvec_row does; lanes
// 16-31 (AVX-512) or 8-31 (AVX2) only stage. The cost is that of a plain loop per row: a mode
// for checking against the CPU, not for speed.
#pragma once

#include "backend/cuda/quant_decode.cuh"

namespace sluice::cuda::quant {
namespace {

// Whether the CPU's AVX2 kernel of kType alternates two accumulators by block.
__host__ __device__ constexpr bool avx2_two_accumulators(QType type) {
  return type == QType::IQ4_NL || type == QType::MXFP4;
}

template <QType kType, int kTokens, bool kAvx512>
__global__ void __launch_bounds__(kInt8Threads)
    cpu_order32_matvec_kernel(ProductList p, int64_t row_bytes, QuantizedRows q, int64_t n_cols) {
  using Block = Block32<kType>;
  constexpr int kStageWords = (32 * Block::kBytes + 15) / 16 + 2;
  constexpr int kLanes = kAvx512 ? 16 : 8;  // the CPU register's float lanes
  constexpr int kBlocksPerStep = kAvx512 ? 2 : 1;
  __shared__ uint4 stage[kInt8RowsPerBlock][kStageWords];
  const ProductRow r = product_row(p, row_bytes);
  if (r.row >= r.n_rows) return;  // whole warps leave; only __syncwarp below
  wait_for_prerequisite();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t n_blocks = n_cols / 32;
  const uint32_t* words = reinterpret_cast<const uint32_t*>(stage[warp]);
  float acc[kTokens], acc_odd[kTokens], sum_min[kTokens];
  for (int t = 0; t < kTokens; ++t) acc[t] = acc_odd[t] = sum_min[t] = 0.0f;
  for (int64_t blk0 = 0; blk0 < n_blocks; blk0 += 32) {
    const int count = n_blocks - blk0 < 32 ? int(n_blocks - blk0) : 32;
    const uint8_t* src = r.row_ptr + Block::kBytes * blk0;
    const uintptr_t aligned = reinterpret_cast<uintptr_t>(src) & ~uintptr_t(15);
    const int off = int(reinterpret_cast<uintptr_t>(src) - aligned);
    const int n_words = (off + Block::kBytes * count + 15) / 16;
    for (int k = lane; k < n_words; k += 32) {
      stage[warp][k] = load_streaming16(reinterpret_cast<const uint4*>(aligned) + k);
    }
    __syncwarp();
    for (int i = 0; i < count; i += kBlocksPerStep) {
      const int b = i + lane / 8;  // this lane's block of the step
      const int part = lane % 8;   // its 4 elements: 4 part .. 4 part + 3
      float min_product[kTokens] = {};
      if (lane < kLanes) {
        const bool present = b < count;
        uint32_t lo[4], hi[4];
        float d = 0.0f, m = 0.0f;
        if (present) Block::unpack(words, off + Block::kBytes * b, lo, hi, d, m);
        const int64_t blk = blk0 + b;
        for (int t = 0; t < kTokens; ++t) {
          // AVX2's second accumulator takes the odd blocks.
          float* target =
              !kAvx512 && avx2_two_accumulators(kType) && blk % 2 == 1 ? &acc_odd[t] : &acc[t];
          if (!present) {
            *target = __fmaf_rn(0.0f, 0.0f, *target);  // the zero-extended partner block
            continue;
          }
          const int x4 = __ldg(reinterpret_cast<const int*>(q.qs + t * n_cols + 32 * blk) + part);
          const int isum = __dp4a(int(part < 4 ? lo[part] : hi[part - 4]), x4, 0);
          *target = __fmaf_rn(float(isum), __fmul_rn(d, __ldg(q.d + t * n_blocks + blk)), *target);
          if constexpr (uses_q8_1(kType)) {
            min_product[t] = __fmul_rn(m, __ldg(q.s + t * n_blocks + blk));
          }
        }
      }
      if constexpr (uses_q8_1(kType)) {
        // Block by block in order: lane 0 holds the step's first block, lane 8 its second.
        for (int t = 0; t < kTokens; ++t) {
          const float second = __shfl_sync(0xffffffffu, min_product[t], 8);
          if (lane == 0) {
            sum_min[t] = __fadd_rn(sum_min[t], min_product[t]);
            if (kAvx512 && i + 1 < count) sum_min[t] = __fadd_rn(sum_min[t], second);
          }
        }
      }
    }
    __syncwarp();
  }
  for (int t = 0; t < kTokens; ++t) {
    float s = kAvx512 || !avx2_two_accumulators(kType) ? acc[t] : __fadd_rn(acc[t], acc_odd[t]);
    for (int offset = kLanes / 2; offset > 0; offset /= 2) {
      s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, offset));
    }
    if (lane == 0) r.y[t * r.n_rows] = uses_q8_1(kType) ? __fadd_rn(s, sum_min[t]) : s;
  }
  allow_dependent_launch();
}

// The grid IQ types (vec_dot_iq_avx2.cpp): Int8Piece's decode gives a sub-block's integer
// weights as the CPU's kernel multiplies them (the IQ1 types' 8 g + delta included).
__host__ __device__ constexpr bool is_cpu_order_grid(QType type) {
  return type == QType::IQ2_XXS || type == QType::IQ2_XS || type == QType::IQ2_S ||
         type == QType::IQ3_XXS || type == QType::IQ3_S || type == QType::IQ1_S ||
         type == QType::IQ1_M;
}
// The 256-element types whose CPU kernels (vec_dot_k_avx512.cpp, vec_dot_k_avx2.cpp,
// vec_dot_iq_avx2.cpp, the tiled matmul) are replayed: all of them. All but Q4_K / Q5_K / Q6_K
// have AVX2 kernels only, which an AVX-512 host runs too.
__host__ __device__ constexpr bool has_cpu_order_k(QType type) {
  return type == QType::Q2_K || type == QType::Q3_K || type == QType::Q4_K || type == QType::Q5_K ||
         type == QType::Q6_K || type == QType::IQ4_XS || is_cpu_order_grid(type);
}
__host__ __device__ constexpr bool avx2_only_k(QType type) {
  return type == QType::Q2_K || type == QType::Q3_K || type == QType::IQ4_XS ||
         is_cpu_order_grid(type);
}
// Where a super-block keeps d and dmin (f16), and whether it has minimums.
__host__ __device__ constexpr int k_d_offset(QType type) {
  return type == QType::Q2_K ? 80 : type == QType::Q3_K ? 108 : type == QType::Q6_K ? 208 : 0;
}
__host__ __device__ constexpr bool k_has_min(QType type) {
  return type == QType::Q2_K || type == QType::Q4_K || type == QType::Q5_K;
}

__device__ __forceinline__ uint32_t load4(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

__device__ __forceinline__ float half_at(const uint8_t* p) {
  return __half2float(__ushort_as_half(uint16_t(p[0] | p[1] << 8)));
}

// Q4_K / Q5_K scale (is_min false) or minimum j of a super-block's 12 packed bytes.
__device__ __forceinline__ int k4_scale(const uint8_t* packed, int j, bool is_min) {
  uint32_t scale = 0, min = 0;
  k_scale_min(packed, j, scale, min);
  return int(is_min ? min : scale);
}

// IQ4_XS's signed 6-bit scale of 32-element sub-block ib (d, scales_h, scales_l[4], qs).
__device__ __forceinline__ int iq4_xs_scale(const uint8_t* blk, int ib) {
  const int low = (blk[4 + ib / 2] >> (4 * (ib % 2))) & 0xf;
  const int high = ((blk[2] | blk[3] << 8) >> (2 * ib)) & 3;
  return (low | (high << 4)) - 32;
}

// Lane l's int32 of one super-block as the CPU's AVX2 kernel of an AVX2-only type holds it:
// elements 4l .. +3 of each 32-element chunk c times the scale they fall under.
//   Q2_K / Q3_K: 2 bits at shift 2(c % 4) of byte 4l + k of the 32-byte half c / 4 (Q3_K's
//     hmask bit c on top, unsigned), the scale of the chunk's 16-element half, 2c + (l >= 4).
//   IQ4_XS: the low nibbles of bytes 4l .. of sub-block c's 16 (lanes 0-3) or the high ones of
//     bytes 4(l - 4) .. (lanes 4-7), through the IQ4_NL table; the sub-block's scale.
//   Grid types: sub-block c's signed values (Int8Piece's decode) 4l .. 4l + 3, the scale of the
//     half they fall in.
template <QType kType>
__device__ __forceinline__ int avx2_only_lane_sum(const uint8_t* blk, const int8_t* x, int l) {
  int sumi = 0;
  for (int c = 0; c < 8; ++c) {
    uint32_t w = 0;
    int scale = 0;
    if constexpr (is_cpu_order_grid(kType)) {
      uint32_t values[8];
      int s0 = 0, s1 = 0;
      Int8Piece<kType, 1>::decode(blk, c, values, s0, s1);
      w = values[l];
      scale = l < 4 ? s0 : s1;
    } else if constexpr (kType == QType::IQ4_XS) {
      const int2 v = iq4nl_lookup(load4(blk + 8 + 16 * c + 4 * (l % 4)));
      w = uint32_t(l < 4 ? v.x : v.y);
      scale = iq4_xs_scale(blk, c);
    } else {
      const uint8_t* qs = blk + (kType == QType::Q2_K ? 16 : 32);
      for (int k = 0; k < 4; ++k) {
        const int b = 4 * l + k;
        uint32_t v = (qs[32 * (c / 4) + b] >> (2 * (c % 4))) & 3;
        if constexpr (kType == QType::Q3_K) v |= ((blk[b] >> c) & 1) << 2;
        w |= v << (8 * k);
      }
      const int g = 2 * c + int(l >= 4);
      scale = kType == QType::Q2_K ? blk[g] & 0xf : q3_k_scale(blk + 96, g);
    }
    sumi += __dp4a(int(w), *reinterpret_cast<const int*>(x + 32 * c + 4 * l), 0) * scale;
  }
  return sumi;
}

// Lane m's int32 of one super-block as the AVX-512 kernel's register holds it: bytes 4(m % 8)
// .. +3 of each 64-element quarter (high nibbles for m >= 8, Q5_K's fifth bit), times the
// quarter's scale; Q6_K: bytes 4m .. +3 of each 64 elements, times the 16-element group's scale.
template <QType kType>
__device__ __forceinline__ int cpu_order_k_lane_sum(const uint8_t* blk, const int8_t* x, int m) {
  int sumi = 0;
  if constexpr (kType == QType::Q6_K) {
    const uint8_t* ql = blk;
    const uint8_t* qh = blk + 128;
    const auto* scales = reinterpret_cast<const int8_t*>(blk + 192);
    for (int h = 0; h < 2; ++h) {
      for (int second = 0; second < 2; ++second) {
        uint32_t w = 0;
        for (int k = 0; k < 4; ++k) {
          const int b = 4 * m + k;
          const int low = second ? ql[64 * h + b] >> 4 : ql[64 * h + b] & 0xf;
          const int high_bits = b < 32 ? qh[32 * h + b] : qh[32 * h + b - 32] >> 2;
          w |= uint32_t(low | (((high_bits >> (4 * second)) & 3) << 4)) << (8 * k);
        }
        const int x4 = *reinterpret_cast<const int*>(x + 128 * h + 64 * second + 4 * m);
        sumi += __dp4a(int(w), x4, 0) * scales[8 * h + 4 * second + m / 4];
      }
    }
  } else {
    const bool high = m >= 8;
    const uint8_t* qs = blk + (kType == QType::Q5_K ? 48 : 16);
    for (int j = 0; j < 4; ++j) {
      const uint32_t q = load4(qs + 32 * j + 4 * (m % 8));
      uint32_t w = high ? (q >> 4) & 0x0f0f0f0fu : q & 0x0f0f0f0fu;
      if constexpr (kType == QType::Q5_K) {
        w |= ((load4(blk + 16 + 4 * (m % 8)) >> (2 * j + int(high))) & 0x01010101u) << 4;
      }
      const int x4 = *reinterpret_cast<const int*>(x + 64 * j + 4 * m);
      sumi += __dp4a(int(w), x4, 0) * k4_scale(blk + 4, 2 * j + int(high), false);
    }
  }
  return sumi;
}

// The K types' products in the CPU kernels' order, one warp per row.
// AVX-512 (vec_dot_k_avx512.cpp), lanes 0-15: per super-block acc = fma(d, sumi, acc); Q4_K /
//   Q5_K's minimums fma(dmin, bsum pairs * min, acc_min) in 8 lanes, taken off after both
//   reductions; Q6_K's -32 as fma(-32 d, scale-weighted bsum pairs, acc) in lanes 0-7 (the
//   other 8 get fma(-32 d, 0, acc)).
// AVX2 (vec_dot_k_avx2.cpp, vec_dot_iq_avx2.cpp), lanes 0-7: lane m's integer is the AVX-512
//   lanes m and m + 8 together (the same bytes, 32 elements apart), or avx2_only_lane_sum's; Q6_K's
//   -32 and Q3_K's -4 folded into it as integers (bsum pairs 2m, 2m + 1 times their scales); Q4_K's
//   minimums in 4 lanes (sub-block pairs) times -dmin, added after ((m0 + m2) + (m1 + m3)); Q5_K's
//   as AVX-512's, Q2_K's per bsum pair 2m, 2m + 1. Reductions: hsum_ps (l + l^4, ^2, ^1).
template <QType kType, int kTokens, bool kAvx512>
__global__ void __launch_bounds__(kInt8Threads)
    cpu_order_k_matvec_kernel(ProductList p, int64_t row_bytes, QuantizedRows q, int64_t n_cols) {
  constexpr int kBytes = BlockDecoder<kType>::kBytes;
  constexpr int kLanes = kAvx512 ? 16 : 8;
  constexpr bool kQ4Avx2Mins = !kAvx512 && kType == QType::Q4_K;  // 4 lanes, added
  const ProductRow r = product_row(p, row_bytes);
  if (r.row >= r.n_rows) return;
  wait_for_prerequisite();
  const int m = threadIdx.x % 32;
  const int64_t n_super = n_cols / 256;
  for (int t = 0; t < kTokens; ++t) {
    float acc = 0.0f, acc_min = 0.0f;
    if (m < kLanes) {
      for (int64_t s = 0; s < n_super; ++s) {
        const uint8_t* blk = r.row_ptr + s * kBytes;
        const float xd = __ldg(q.d + t * n_super + s);
        const int16_t* bsums = q.bsums + t * (n_cols / 16) + 16 * s;
        const int8_t* x = q.qs + t * n_cols + 256 * s;
        int sumi = 0;
        if constexpr (avx2_only_k(kType)) {
          static_assert(!kAvx512, "Q2_K / Q3_K / IQ4_XS have AVX2 kernels only");
          sumi = avx2_only_lane_sum<kType>(blk, x, m);
        } else {
          sumi = cpu_order_k_lane_sum<kType>(blk, x, m);
          if constexpr (!kAvx512) sumi += cpu_order_k_lane_sum<kType>(blk, x, m + 8);
        }
        if constexpr (kType == QType::Q3_K) {
          const int offset = bsums[2 * m] * q3_k_scale(blk + 96, 2 * m) +
                             bsums[2 * m + 1] * q3_k_scale(blk + 96, 2 * m + 1);
          acc = __fmaf_rn(__fmul_rn(half_at(blk + 108), xd), float(sumi - 4 * offset), acc);
        } else if constexpr (kType == QType::Q2_K) {
          acc = __fmaf_rn(__fmul_rn(xd, half_at(blk + 80)), float(sumi), acc);
          const int mins =
              bsums[2 * m] * (blk[2 * m] >> 4) + bsums[2 * m + 1] * (blk[2 * m + 1] >> 4);
          acc_min = __fmaf_rn(__fmul_rn(xd, half_at(blk + 82)), float(mins), acc_min);
        } else if constexpr (is_cpu_order_grid(kType)) {
          acc = __fmaf_rn(__fmul_rn(Int8Piece<kType, 1>::block_d(blk), xd), float(sumi), acc);
        } else if constexpr (kType == QType::IQ4_XS) {
          acc = __fmaf_rn(__fmul_rn(half_at(blk), xd), float(sumi), acc);
        } else if constexpr (kType == QType::Q6_K) {
          const float d = __fmul_rn(half_at(blk + 208), xd);
          const auto* scales = reinterpret_cast<const int8_t*>(blk + 192);
          const int offset =
              m < 8 ? bsums[2 * m] * scales[2 * m] + bsums[2 * m + 1] * scales[2 * m + 1] : 0;
          if constexpr (kAvx512) {
            acc = __fmaf_rn(d, float(sumi), acc);
            acc = __fmaf_rn(__fmul_rn(-32.0f, d), float(offset), acc);
          } else {
            acc = __fmaf_rn(d, float(sumi - 32 * offset), acc);
          }
        } else {
          acc = __fmaf_rn(__fmul_rn(half_at(blk), xd), float(sumi), acc);
          if constexpr (kQ4Avx2Mins) {
            if (m < 4) {
              const int pair0 = bsums[4 * m] + bsums[4 * m + 1];
              const int pair1 = bsums[4 * m + 2] + bsums[4 * m + 3];
              const int mins = k4_scale(blk + 4, 2 * m, true) * pair0 +
                               k4_scale(blk + 4, 2 * m + 1, true) * pair1;
              acc_min = __fmaf_rn(__fmul_rn(-xd, half_at(blk + 2)), float(mins), acc_min);
            }
          } else if (m < 8) {
            const int mins = (bsums[2 * m] + bsums[2 * m + 1]) * k4_scale(blk + 4, m, true);
            acc_min = __fmaf_rn(__fmul_rn(half_at(blk + 2), xd), float(mins), acc_min);
          }
        }
      }
    }
    float sum = acc;
    for (int offset = kLanes / 2; offset > 0; offset /= 2) {
      sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, offset));
    }
    float sum_min = acc_min;
    for (int offset = kQ4Avx2Mins ? 2 : 4; offset > 0; offset /= 2) {
      sum_min = __fadd_rn(sum_min, __shfl_xor_sync(0xffffffffu, sum_min, offset));
    }
    if constexpr (is_cpu_order_grid(kType)) sum = __fmul_rn(Int8Piece<kType, 1>::kFactor, sum);
    if (m == 0) {
      r.y[t * r.n_rows] = !k_has_min(kType) ? sum
                          : kQ4Avx2Mins     ? __fadd_rn(sum, sum_min)
                                            : __fsub_rn(sum, sum_min);
    }
  }
  allow_dependent_launch();
}

// Element e (< 256) of a K super-block as the CPU's tiled matmul decodes it: its signed value
// and the scale and minimum of its group (backend/cpu/tiled_kquant.h).
template <QType kType>
__device__ __forceinline__ void cpu_tiled_element(const uint8_t* blk, int e, int* value, int* scale,
                                                  int* min) {
  if constexpr (is_cpu_order_grid(kType)) {
    uint32_t values[8];
    int s0 = 0, s1 = 0;
    Int8Piece<kType, 1>::decode(blk, e / 32, values, s0, s1);
    *value = int8_t((values[(e % 32) / 4] >> (8 * (e % 4))) & 0xff);
    *scale = e % 32 < 16 ? s0 : s1;
    *min = 0;
  } else if constexpr (kType == QType::IQ4_XS) {
    // Sub-block e / 32: the low nibbles of its 16 bytes, then the high ones.
    const int ib = e / 32, j = e % 32;
    const uint8_t q = blk[8 + 16 * ib + j % 16];
    const int2 v = iq4nl_lookup(q);  // byte 0: the low nibble's value (x), the high one's (y)
    *value = int8_t((j < 16 ? v.x : v.y) & 0xff);
    *scale = iq4_xs_scale(blk, ib);
    *min = 0;
  } else if constexpr (avx2_only_k(kType)) {
    // Byte e % 32 of half e / 128 at shift 2((e / 32) % 4); Q3_K: minus 4 where hmask's bit
    // e / 32 is clear.
    const uint8_t* qs = blk + (kType == QType::Q2_K ? 16 : 32);
    const int group = e / 32;
    *value = (qs[32 * (group / 4) + e % 32] >> (2 * (group % 4))) & 3;
    if constexpr (kType == QType::Q2_K) {
      *scale = blk[e / 16] & 0xf;
      *min = blk[e / 16] >> 4;
    } else {
      if (((blk[e % 32] >> group) & 1) == 0) *value -= 4;
      *scale = q3_k_scale(blk + 96, e / 16);
      *min = 0;
    }
  } else if constexpr (kType == QType::Q6_K) {
    const int h = e / 128, second = (e % 128) / 64, b = e % 64;
    const uint8_t ql = blk[64 * h + b];
    const int high_bits = b < 32 ? blk[128 + 32 * h + b] : blk[128 + 32 * h + b - 32] >> 2;
    *value = ((second ? ql >> 4 : ql & 0xf) | (((high_bits >> (4 * second)) & 3) << 4)) - 32;
    *scale = reinterpret_cast<const int8_t*>(blk + 192)[e / 16];
    *min = 0;
  } else {
    const int quarter = e / 64, pos = e % 64;
    const uint8_t* qs = blk + (kType == QType::Q5_K ? 48 : 16);
    const uint8_t q = qs[32 * quarter + pos % 32];
    *value = pos < 32 ? q & 0xf : q >> 4;
    if constexpr (kType == QType::Q5_K) {
      *value |= ((blk[16 + pos % 32] >> (2 * quarter + int(pos >= 32))) & 1) << 4;
    }
    *scale = k4_scale(blk + 4, e / 32, false);
    *min = k4_scale(blk + 4, e / 32, true);
  }
}

// The CPU's tiled K matmul (chunks of 8 tokens or more there), per row and token, block by
// block: s1 = sum of scale * w * q and s2 = sum of min * bsum (exact integers, here a warp
// sum), res = d * s1, res = fma(-dmin, s2, res) with minimums, then acc = fma(res, dx, acc)
// where the CPU's best ISA is AVX2, acc + res * dx where it is AVX-512 (kFused false).
template <QType kType, int kTokens, bool kFused>
__global__ void __launch_bounds__(kInt8Threads)
    cpu_tiled_k_matvec_kernel(ProductList p, int64_t row_bytes, QuantizedRows q, int64_t n_cols) {
  constexpr int kBytes = BlockDecoder<kType>::kBytes;
  const ProductRow r = product_row(p, row_bytes);
  if (r.row >= r.n_rows) return;
  wait_for_prerequisite();
  const int lane = threadIdx.x % 32;
  const int64_t n_super = n_cols / 256;
  float acc[kTokens] = {};
  for (int64_t s = 0; s < n_super; ++s) {
    const uint8_t* blk = r.row_ptr + s * kBytes;
    int values[8], scale = 0, min = 0;
    for (int k = 0; k < 8; ++k)
      cpu_tiled_element<kType>(blk, 8 * lane + k, &values[k], &scale, &min);
    float d = half_at(blk + k_d_offset(kType));
    if constexpr (is_cpu_order_grid(kType)) {
      d = __fmul_rn(Int8Piece<kType, 1>::block_d(blk), Int8Piece<kType, 1>::kFactor);
    }
    for (int t = 0; t < kTokens; ++t) {
      const int8_t* x = q.qs + t * n_cols + 256 * s + 8 * lane;
      int s1 = 0;
      for (int k = 0; k < 8; ++k) s1 += values[k] * x[k];
      s1 *= scale;
      // Lanes 2g and 2g + 1 hold group g: its bsum counted once, by the even lane.
      int s2 = lane % 2 == 0 ? min * q.bsums[t * (n_cols / 16) + 16 * s + lane / 2] : 0;
      for (int offset = 16; offset > 0; offset /= 2) {
        s1 += __shfl_xor_sync(0xffffffffu, s1, offset);
        s2 += __shfl_xor_sync(0xffffffffu, s2, offset);
      }
      float res = __fmul_rn(d, float(s1));
      if constexpr (k_has_min(kType)) {
        res = __fmaf_rn(-half_at(blk + k_d_offset(kType) + 2), float(s2), res);
      }
      const float dx = __ldg(q.d + t * n_super + s);
      acc[t] = kFused ? __fmaf_rn(res, dx, acc[t]) : __fadd_rn(acc[t], __fmul_rn(res, dx));
    }
  }
  if (lane == 0) {
    for (int t = 0; t < kTokens; ++t) r.y[t * r.n_rows] = acc[t];
  }
  allow_dependent_launch();
}

// The float weight types (vec_dot_f_avx512.cpp / vec_dot_f_avx2.cpp): the activations
// converted to the weight's type (F16 / BF16, round to nearest even; F32 as they are), four
// accumulators of kLanes (16 or 8) lanes over steps of 4 kLanes elements, then steps of kLanes
// into the first, the accumulators added lane-wise as (a0 + a1) + (a2 + a3), reduced across
// lanes (l + l^(kLanes/2), …, ^1), and the last n % kLanes products added one by one. One warp
// per row: thread t holds accumulator slots t and t + 32 (slot s = kLanes k + lane).
template <QType kType>
__device__ __forceinline__ float cpu_float_weight(const uint8_t* row, int64_t i) {
  if constexpr (kType == QType::F32) return reinterpret_cast<const float*>(row)[i];
  const uint16_t bits = reinterpret_cast<const uint16_t*>(row)[i];
  if constexpr (kType == QType::F16) return __half2float(__ushort_as_half(bits));
  return __uint_as_float(uint32_t(bits) << 16);
}
template <QType kType>
__device__ __forceinline__ float cpu_float_activation(float x) {
  if constexpr (kType == QType::F32) return x;
  if constexpr (kType == QType::F16) return __half2float(__float2half_rn(x));
  const uint32_t bits = __float_as_uint(x);  // core/half.h's fp32_to_bf16
  if ((bits & 0x7fffffffu) > 0x7f800000u) return __uint_as_float(((bits >> 16) | 64) << 16);
  return __uint_as_float(((bits + (0x7fffu + ((bits >> 16) & 1u))) >> 16) << 16);
}

template <QType kType, bool kAvx512>
__global__ void __launch_bounds__(kInt8Threads)
    cpu_order_float_matvec_kernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t n_rows,
                                  const float* __restrict__ x, int64_t n_cols, int64_t n_tokens,
                                  float* __restrict__ y) {
  constexpr int kLanes = kAvx512 ? 16 : 8;
  constexpr int kStep = 4 * kLanes;  // 64 or 32 accumulator slots
  const int64_t row = int64_t(blockIdx.x) * kInt8RowsPerBlock + threadIdx.x / 32;
  if (row >= n_rows) return;
  wait_for_prerequisite();
  const int lane = threadIdx.x % 32;
  const uint8_t* w_row = w + row * row_bytes;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xt = x + t * n_cols;
    float acc[2] = {0.0f, 0.0f};  // slots lane and lane + 32
    int64_t i = 0;
    for (; i + kStep <= n_cols; i += kStep) {
      for (int h = 0; h < 2; ++h) {
        const int slot = lane + 32 * h;
        if (slot < kStep) {
          acc[h] = __fmaf_rn(cpu_float_weight<kType>(w_row, i + slot),
                             cpu_float_activation<kType>(xt[i + slot]), acc[h]);
        }
      }
    }
    for (; i + kLanes <= n_cols; i += kLanes) {
      if (lane < kLanes) {
        acc[0] = __fmaf_rn(cpu_float_weight<kType>(w_row, i + lane),
                           cpu_float_activation<kType>(xt[i + lane]), acc[0]);
      }
    }
    // Accumulator k of lane j is slot kLanes k + j.
    const auto slot_value = [&](int slot) {
      const float v0 = __shfl_sync(0xffffffffu, acc[0], slot % 32);
      const float v1 = __shfl_sync(0xffffffffu, acc[1], slot % 32);
      return slot < 32 ? v0 : v1;
    };
    const int j = lane % kLanes;
    const float a01 = __fadd_rn(slot_value(j), slot_value(kLanes + j));
    const float a23 = __fadd_rn(slot_value(2 * kLanes + j), slot_value(3 * kLanes + j));
    float sum = __fadd_rn(a01, a23);
    for (int offset = kLanes / 2; offset > 0; offset /= 2) {
      sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, offset));
    }
    if (lane == 0) {
      for (; i < n_cols; ++i) {
        sum = __fadd_rn(
            sum, __fmul_rn(cpu_float_weight<kType>(w_row, i), cpu_float_activation<kType>(xt[i])));
      }
      y[t * n_rows + row] = sum;
    }
  }
  allow_dependent_launch();
}

}  // namespace
}  // namespace sluice::cuda::quant
