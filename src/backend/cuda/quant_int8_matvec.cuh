// Decode (n_tokens <= 8) through integer dot products, as the CPU backend and llama.cpp's MMVQ
// compute it: the activations are first quantized to the type the CPU pairs with the weight
// (quant/dot_reference.h: Q8_K, int8 per element, one float scale per 256, int sums per 16; or
// Q8_0 for Q8_0 weights), bit for bit as quant/quantize.cpp does, by a small kernel into the
// stream's scratch (quant_scratch.cu); the matvec kernel then multiplies the weight's raw
// integers with those int8 values four at a time (__dp4a) and applies the float scales once per
// 16-32 elements. Float decoding spent ~9 instructions per weight element and could not keep
// up with memory; this path spends well under 2.
//
// Why quantized activations: the integer products are exact, so the result differs from
// quant/dot_reference.h (the CPU's own decode math) only by the order of the float additions
// over blocks; the test checks it against that reference (README: tolerance).
//
// Layout of the quantized activations (QuantizedRows): qs [n_tokens][n_cols] int8, then
// d [n_tokens][n_cols / block] float, then bsums [n_tokens][n_cols / 16] int16 (Q8_K only):
// each array dense so a lane's 16-byte loads of qs stay aligned.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/quant_kernel_set.h"
#include "quant/qtype.h"

namespace sluice::cuda::quant {
namespace {

// Weight types whose decode goes through int8 activations and __dp4a (every quantized type;
// the pieces of the later ones are in quant_int8_pieces.cuh), and the activation block the CPU
// pairs them with (quant/dot_reference.h): 256 = Q8_K, 32 = Q8_0 or Q8_1.
constexpr bool has_int8_matvec(QType type) {
  return type != QType::F32 && type != QType::F16 && type != QType::BF16;
}
__host__ __device__ constexpr bool uses_q8_1(
    QType type) {  // a minimum term: Q8_1's s = d * sum(q) per block
  return type == QType::Q4_1 || type == QType::Q5_1;
}
constexpr int activation_block(QType type) {
  switch (type) {
    case QType::Q8_0:
    case QType::Q4_0:
    case QType::Q4_1:
    case QType::Q5_0:
    case QType::Q5_1:
    case QType::IQ4_NL:
    case QType::MXFP4:
      return 32;
    default:
      return 256;
  }
}

// s: Q8_1's per-block d * sum(q) (fp16-rounded, as float), stored where Q8_K keeps its bsums
// (n_cols / 16 int16 = n_cols / 32 floats per token).
struct QuantizedRows {
  int8_t* qs;
  float* d;
  int16_t* bsums;
  float* s;
};

// `block`: 256 (Q8_K: d per 256, bsums per 16) or 32 (Q8_0: d per 32, the fp16-rounded scale
// as float; no bsums). n_cols is a multiple of `block`, so every array stays 16-byte aligned
// up to the bsums (4-byte aligned d suffices for them).
QuantizedRows split_scratch(void* base, int64_t n_tokens, int64_t n_cols, int block) {
  auto* bytes = static_cast<uint8_t*>(base);
  QuantizedRows q;
  q.qs = reinterpret_cast<int8_t*>(bytes);
  q.d = reinterpret_cast<float*>(bytes + n_tokens * n_cols);
  q.bsums = reinterpret_cast<int16_t*>(bytes + n_tokens * n_cols + n_tokens * (n_cols / block) * 4);
  q.s = reinterpret_cast<float*>(q.bsums);
  return q;
}

int64_t scratch_bytes(int64_t n_tokens, int64_t n_cols, int block) {
  return quantized_rows_bytes(n_tokens, n_cols, block);
}

// The products are launched as dependents of the kernel ahead (cuda_launch.cuh): the quantize
// kernel (or a quantizing norm) lets them be scheduled at once; they wait for it to finish before
// reading anything. Measured and dropped (docs/BENCHMARKS.md, "decode tuning"): prefetching the
// row to L2 before the wait (its extra requests cost more than they hid), and letting
// back-to-back matvecs launch at their start (the waiting blocks slowed the one-wave 4096-row
// products); a warp lets the next kernel launch once its row is done.

// One warp per 256-element block, 8 elements per lane. Mirrors quantize_row_q8_k:
// the signed element of largest magnitude (first wins a tie), iscale = -127 / max, round half to
// even of the rounded product, clamp at 127, d = 1 / iscale; an all-zero block gives zeros.
constexpr int kQuantizeWarps = 8;

// Block `block`'s lane share: elements 8 lane .. 8 lane + 7 are v. Also the fused GLU's
// (cuda_glu_quantize.cu), so both quantize alike.
__device__ __forceinline__ void store_q8_k_block(const float (&v)[8], int lane, int64_t block,
                                                 const QuantizedRows& q) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 8; ++j) {
    const float ax = fabsf(v[j]);
    if (ax > amax) amax = ax, max = v[j];
  }
  // Across lanes: larger magnitude wins, the lower lane (earlier element) wins a tie.
  for (int offset = 1; offset < 32; offset *= 2) {
    const float other_amax = __shfl_xor_sync(0xffffffffu, amax, offset);
    const float other_max = __shfl_xor_sync(0xffffffffu, max, offset);
    const bool other_first = (lane ^ offset) < lane;
    if (other_amax > amax || (other_amax == amax && other_first))
      amax = other_amax, max = other_max;
  }
  int8_t* qs = q.qs + block * 256 + 8 * lane;
  uint32_t packed[2] = {0, 0};
  int sum = 0;
  float d = 0.0f;
  if (max != 0.0f) {
    const float iscale = __fdiv_rn(-127.0f, max);
    for (int j = 0; j < 8; ++j) {
      int r = __float2int_rn(__fmul_rn(iscale, v[j]));
      r = r < 127 ? r : 127;
      sum += r;
      packed[j / 4] |= uint32_t(r & 0xff) << (8 * (j % 4));
    }
    d = __fdiv_rn(1.0f, iscale);
  }
  *reinterpret_cast<uint2*>(qs) = make_uint2(packed[0], packed[1]);
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);  // two lanes make one 16-element sum
  if (lane % 2 == 0) q.bsums[block * 16 + lane / 2] = int16_t(sum);
  if (lane == 0) q.d[block] = d;
}

__global__ void __launch_bounds__(32 * kQuantizeWarps)
    quantize_q8_k_kernel(const float* __restrict__ x, int64_t n_blocks_total, QuantizedRows q) {
  wait_for_prerequisite();
  allow_dependent_launch();
  const int lane = threadIdx.x % 32;
  const int64_t block = int64_t(blockIdx.x) * kQuantizeWarps + threadIdx.x / 32;
  if (block >= n_blocks_total) return;
  const float4* src = reinterpret_cast<const float4*>(x + block * 256 + 8 * lane);
  const float4 a = __ldg(src), b = __ldg(src + 1);
  const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  store_q8_k_block(v, lane, block, q);
}

// One warp per 32-element block, one element per lane. Mirrors the CPU backend's activation
// quantizers (backend/cpu/activation_quantize.h, ggml's x86 arithmetic): d = absmax / 127,
// q = x * (127 / absmax) rounded half to even (0 for an all-zero block) — not the reference's
// roundf(x * (1 / d)), which differs in the last bit of some quants, and a greedy path can hinge
// on one. The dot product uses the scale rounded to f16, so that is what d keeps. kWithSum: Q8_1,
// which also keeps s = f16(d * float(sum q)) (unrounded d).
// Block `block`'s element `lane` is v (also the fused GLU's, as store_q8_k_block).
template <bool kWithSum>
__device__ __forceinline__ void store_q8_0_block(float v, int lane, int64_t block,
                                                 const QuantizedRows& q) {
  // Non-negative floats order as their bit patterns.
  const float amax = __uint_as_float(__reduce_max_sync(0xffffffffu, __float_as_uint(fabsf(v))));
  const float d = __fdiv_rn(amax, 127.0f);
  const float id = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
  const int r = __float2int_rn(__fmul_rn(v, id));
  q.qs[block * 32 + lane] = int8_t(r);
  if (lane == 0) q.d[block] = __half2float(__float2half_rn(d));
  if constexpr (kWithSum) {
    const int sum = __reduce_add_sync(0xffffffffu, r);
    if (lane == 0) q.s[block] = __half2float(__float2half_rn(__fmul_rn(d, float(sum))));
  }
}

template <bool kWithSum>
__global__ void __launch_bounds__(32 * kQuantizeWarps)
    quantize_q8_0_kernel(const float* __restrict__ x, int64_t n_blocks_total, QuantizedRows q) {
  wait_for_prerequisite();
  allow_dependent_launch();
  const int lane = threadIdx.x % 32;
  const int64_t block = int64_t(blockIdx.x) * kQuantizeWarps + threadIdx.x / 32;
  if (block >= n_blocks_total) return;
  store_q8_0_block<kWithSum>(__ldg(x + block * 32 + lane), lane, block, q);
}

// ---- per-type integer kernels --------------------------------------------------------------
// One warp per weight row, 4 rows per block of 128 threads. Lane L handles, in super-block
// 4i + L / 8, the 16-byte piece L % 8 of the type's packed low bits, so a warp reads 4 whole
// super-blocks per step, every lane with one aligned 16-byte load (plus the few scale bytes,
// which 8 lanes share through L1). Partial sums per lane in float, then a warp shuffle tree.

constexpr int kInt8Threads = 128;
constexpr int kInt8RowsPerBlock = kInt8Threads / 32;

__device__ __forceinline__ uint32_t byte_at(const uint8_t* p) {
  return __ldg(p);
}

// Weight bytes are read once per call: a load that does not allocate in L1 leaves L1 to the
// quantized activations, which every row of the block (and the SM's later rows) reads again.
__device__ __forceinline__ uint4 load_streaming16(const void* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// Q4_K / Q5_K block head (16 bytes, 16-byte aligned: both block sizes are multiples of 16):
// d, dmin (f16) in x, the twelve 6-bit scale/minimum bytes in y, z, w. One 16-byte load
// replaces the word and the 4-6 byte loads the scales took per piece, which cost more issue
// and L1 slots than the piece's 16 bytes of quants. Sub-blocks 2c and 2c + 1 (c = 0..3): their
// scales (sc0, sc1) and minimums (m0, m1), unpacked four at a time as ggml's utmp does.
struct K4Head {
  float d, dmin;
  int sc0, sc1, m0, m1;
};
__device__ __forceinline__ K4Head k4_head(const uint8_t* b, int c) {
  const uint4 head = load_streaming16(b);
  K4Head h;
  h.d = __half2float(__ushort_as_half(uint16_t(head.x & 0xffff)));
  h.dmin = __half2float(__ushort_as_half(uint16_t(head.x >> 16)));
  // Bytes j of `scales` / `mins`: sub-block 4 (c / 2) + j.
  const uint32_t scales =
      c < 2 ? head.y & 0x3f3f3f3fu : (head.w & 0x0f0f0f0fu) | ((head.y >> 2) & 0x30303030u);
  const uint32_t mins =
      c < 2 ? head.z & 0x3f3f3f3fu : ((head.w >> 4) & 0x0f0f0f0fu) | ((head.z >> 2) & 0x30303030u);
  const int shift = 16 * (c % 2);
  h.sc0 = (scales >> shift) & 0xff;
  h.sc1 = (scales >> (shift + 8)) & 0xff;
  h.m0 = (mins >> shift) & 0xff;
  h.m1 = (mins >> (shift + 8)) & 0xff;
  return h;
}

__device__ __forceinline__ int dot4x4(const uint32_t (&w)[4], const int4& a, int acc) {
  acc = __dp4a(int(w[0]), a.x, acc);
  acc = __dp4a(int(w[1]), a.y, acc);
  acc = __dp4a(int(w[2]), a.z, acc);
  return __dp4a(int(w[3]), a.w, acc);
}

// The per-lane piece of one super-block for kTokens tokens; adds to acc[t].
template <QType kType, int kTokens>
struct Int8Piece;

// Q4_K: qs chunk c (32 bytes) holds sub-blocks 2c (low nibbles) and 2c + 1 (high nibbles);
// piece p = 2c + h takes bytes 16h .. 16h + 15 of the chunk, i.e. elements 16h .. 16h + 15 of
// both sub-blocks, which are exactly Q8_K's bsums 2(2c) + h and 2(2c + 1) + h.
template <int kTokens>
struct Int8Piece<QType::Q4_K, kTokens> {
  static constexpr int kBytes = 144;
  __device__ static void run(const uint8_t* b, int piece, const QuantizedRows& q, int64_t n_cols,
                             int64_t block, float* acc) {
    const int c = piece / 2, h = piece % 2;
    const uint4 raw = load_streaming16(b + 16 + 32 * c + 16 * h);
    const K4Head head = k4_head(b, c);
    const float d = head.d, dmin = head.dmin;
    const int sc0 = head.sc0, sc1 = head.sc1;
    // The minimum's term m0 * sum(a0) + m1 * sum(a1), straight from the activations already in
    // registers (m < 64 fits a signed byte): no bsums loads.
    const uint32_t m0 = uint32_t(head.m0) * 0x01010101u, m1 = uint32_t(head.m1) * 0x01010101u;
    const uint32_t min0[4] = {m0, m0, m0, m0}, min1[4] = {m1, m1, m1, m1};
    const uint32_t lo[4] = {raw.x & 0x0f0f0f0fu, raw.y & 0x0f0f0f0fu, raw.z & 0x0f0f0f0fu,
                            raw.w & 0x0f0f0f0fu};
    const uint32_t hi[4] = {(raw.x >> 4) & 0x0f0f0f0fu, (raw.y >> 4) & 0x0f0f0f0fu,
                            (raw.z >> 4) & 0x0f0f0f0fu, (raw.w >> 4) & 0x0f0f0f0fu};
    const int64_t nb = n_cols / 256;
    for (int t = 0; t < kTokens; ++t) {
      const int8_t* xq = q.qs + t * n_cols + block * 256;
      const int4 a0 = __ldg(reinterpret_cast<const int4*>(xq + 64 * c + 16 * h));
      const int4 a1 = __ldg(reinterpret_cast<const int4*>(xq + 64 * c + 32 + 16 * h));
      const int isum = sc0 * dot4x4(lo, a0, 0) + sc1 * dot4x4(hi, a1, 0);
      const int imin = dot4x4(min1, a1, dot4x4(min0, a0, 0));
      const float dx = __ldg(q.d + t * nb + block);
      acc[t] += __fmul_rn(d, dx) * float(isum) - __fmul_rn(dmin, dx) * float(imin);
    }
  }
};

// Q5_K: Q4_K plus qh (32 bytes at offset 16): bit `sub` of qh[l] is the fifth bit of element
// 32 sub + l. Piece 2c + h reads qh bytes 16h .. 16h + 15 (bits 2c and 2c + 1).
template <int kTokens>
struct Int8Piece<QType::Q5_K, kTokens> {
  static constexpr int kBytes = 176;
  __device__ static void run(const uint8_t* b, int piece, const QuantizedRows& q, int64_t n_cols,
                             int64_t block, float* acc) {
    const int c = piece / 2, h = piece % 2;
    const uint4 raw = load_streaming16(b + 48 + 32 * c + 16 * h);
    const uint4 qh = load_streaming16(b + 16 + 16 * h);
    const K4Head head = k4_head(b, c);
    const float d = head.d, dmin = head.dmin;
    const int sc0 = head.sc0, sc1 = head.sc1;
    // The minimum's term m0 * sum(a0) + m1 * sum(a1), straight from the activations already in
    // registers (m < 64 fits a signed byte): no bsums loads.
    const uint32_t m0 = uint32_t(head.m0) * 0x01010101u, m1 = uint32_t(head.m1) * 0x01010101u;
    const uint32_t min0[4] = {m0, m0, m0, m0}, min1[4] = {m1, m1, m1, m1};
    const uint32_t r[4] = {raw.x, raw.y, raw.z, raw.w};
    const uint32_t hb[4] = {qh.x, qh.y, qh.z, qh.w};
    uint32_t lo[4], hi[4];
    for (int k = 0; k < 4; ++k) {
      lo[k] = (r[k] & 0x0f0f0f0fu) | (((hb[k] >> (2 * c)) & 0x01010101u) << 4);
      hi[k] = ((r[k] >> 4) & 0x0f0f0f0fu) | (((hb[k] >> (2 * c + 1)) & 0x01010101u) << 4);
    }
    const int64_t nb = n_cols / 256;
    for (int t = 0; t < kTokens; ++t) {
      const int8_t* xq = q.qs + t * n_cols + block * 256;
      const int4 a0 = __ldg(reinterpret_cast<const int4*>(xq + 64 * c + 16 * h));
      const int4 a1 = __ldg(reinterpret_cast<const int4*>(xq + 64 * c + 32 + 16 * h));
      const int isum = sc0 * dot4x4(lo, a0, 0) + sc1 * dot4x4(hi, a1, 0);
      const int imin = dot4x4(min1, a1, dot4x4(min0, a0, 0));
      const float dx = __ldg(q.d + t * nb + block);
      acc[t] += __fmul_rn(d, dx) * float(isum) - __fmul_rn(dmin, dx) * float(imin);
    }
  }
};

// Q6_K (210-byte blocks, only 2-byte aligned): ql [128], qh [64], scales int8 [16], d f16.
// Element 128 s + 32 k + l (half s, quarter k, l < 32) has low nibble
// (ql[64 s + 32 (k % 2) + l] >> 4 (k / 2)) and top bits (qh[32 s + l] >> 2k) & 3, minus 32;
// its 16-element scale is scales[8 s + 2k + l / 16]. Piece p = 4 s + 2 j + h (j = k % 2 of the
// ql bytes, h: l in 16h .. 16h + 15) reads 16 ql bytes and 16 qh bytes and serves quarters
// k = j and k = j + 2, i.e. 32 elements. Loads: 2-byte pieces would cost as much as the math,
// so the lane reads the aligned 16-byte words covering its bytes and shifts them into place.
__device__ __forceinline__ uint32_t funnel(uint32_t lo, uint32_t hi, int shift_bytes) {
  return __funnelshift_r(lo, hi, 8 * shift_bytes);
}
__device__ __forceinline__ void load16_unaligned(const uint8_t* p, uint32_t (&out)[4]) {
  // p is 2-byte aligned: read the two aligned 16-byte words around it, shift bytes into place.
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  const uint4* base = reinterpret_cast<const uint4*>(addr & ~uintptr_t(15));
  const int off = int(addr & 15);
  const uint4 a = __ldg(base);
  if (off == 0) {
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
    return;
  }
  const uint4 b = __ldg(base + 1);
  const uint32_t w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  const int word = off / 4, shift = off % 4;
  // word is 0..3: select without dynamic register indexing.
  uint32_t s[5];
  for (int k = 0; k < 5; ++k) {
    s[k] = word == 0 ? w[k] : word == 1 ? w[k + 1] : word == 2 ? w[k + 2] : w[k + 3];
  }
  for (int k = 0; k < 4; ++k) out[k] = funnel(s[k], s[k + 1], shift);
}

template <int kTokens>
struct Int8Piece<QType::Q6_K, kTokens> {
  static constexpr int kBytes = 210;
  __device__ static void run(const uint8_t* b, int piece, const QuantizedRows& q, int64_t n_cols,
                             int64_t block, float* acc) {
    const int s = piece / 4, j = (piece / 2) % 2, h = piece % 2;
    uint32_t ql[4], qh[4];
    load16_unaligned(b + 64 * s + 32 * j + 16 * h, ql);
    load16_unaligned(b + 128 + 32 * s + 16 * h, qh);
    const float d = __half2float(  // d sits 2-byte aligned at 208: one 16-bit load
        __ushort_as_half(__ldg(reinterpret_cast<const unsigned short*>(b + 208))));
    const int k0 = j, k1 = j + 2;  // the two quarters this piece serves
    const int sc0 = int8_t(byte_at(b + 192 + 8 * s + 2 * k0 + h));
    const int sc1 = int8_t(byte_at(b + 192 + 8 * s + 2 * k1 + h));
    uint32_t v0[4], v1[4];
    for (int k = 0; k < 4; ++k) {
      // value - 32 per byte: (low | top << 4) in 0..63, then subtract 32 bytewise (no borrow
      // crosses bytes since each byte is >= 0 and we compute in signed bytes via __vsub4).
      const uint32_t a = (ql[k] & 0x0f0f0f0fu) | (((qh[k] >> (2 * k0)) & 0x03030303u) << 4);
      const uint32_t c = ((ql[k] >> 4) & 0x0f0f0f0fu) | (((qh[k] >> (2 * k1)) & 0x03030303u) << 4);
      v0[k] = __vsub4(a, 0x20202020u);
      v1[k] = __vsub4(c, 0x20202020u);
    }
    const int64_t nb = n_cols / 256;
    for (int t = 0; t < kTokens; ++t) {
      const int8_t* xq = q.qs + t * n_cols + block * 256 + 128 * s + 16 * h;
      const int4 a0 = __ldg(reinterpret_cast<const int4*>(xq + 32 * k0));
      const int4 a1 = __ldg(reinterpret_cast<const int4*>(xq + 32 * k1));
      const int isum = sc0 * dot4x4(v0, a0, 0) + sc1 * dot4x4(v1, a1, 0);
      const float dx = __ldg(q.d + t * nb + block);
      acc[t] += __fmul_rn(d, dx) * float(isum);
    }
  }
};

// Q2_K (84-byte blocks, 4-byte aligned): scales [16] (low nibble scale, high nibble minimum
// per 16 elements), qs [64], d, dmin. Element 128 h + 32 p + j (j < 32) is
// (qs[32 h + j] >> 2p) & 3. Piece m = 4 h + k takes qs bytes 32 h + 8k .. + 7: 8 elements of
// each plane p, 32 in all; their 16-element scale is scales[8 h + 2p + k / 2]. Q8_K's bsums
// cover 16 elements, so the minimum's activation sums come from __dp4a with ones.
template <int kTokens>
struct Int8Piece<QType::Q2_K, kTokens> {
  static constexpr int kBytes = 84;
  __device__ static void run(const uint8_t* b, int piece, const QuantizedRows& q, int64_t n_cols,
                             int64_t block, float* acc) {
    const int h = piece / 4, k = piece % 4;
    const uint32_t* qs = reinterpret_cast<const uint32_t*>(b + 16 + 32 * h + 8 * k);
    const uint32_t w0 = __ldg(qs), w1 = __ldg(qs + 1);
    const uint32_t dd = __ldg(reinterpret_cast<const uint32_t*>(b + 80));
    const float d = __half2float(__ushort_as_half(uint16_t(dd & 0xffff)));
    const float dmin = __half2float(__ushort_as_half(uint16_t(dd >> 16)));
    // The four scale bytes 8h + k/2 + {0, 2, 4, 6}: one aligned word pair, picked by byte.
    const uint32_t* sw = reinterpret_cast<const uint32_t*>(b + 8 * h);
    const uint32_t s_lo = __ldg(sw), s_hi = __ldg(sw + 1);
    const uint32_t sel = k / 2 == 0 ? 0x6420u : 0x7531u;
    const uint32_t scales = __byte_perm(s_lo, s_hi, sel);  // byte p: scale byte of plane p
    const int64_t nb = n_cols / 256;
    for (int t = 0; t < kTokens; ++t) {
      const int8_t* xq = q.qs + t * n_cols + block * 256 + 128 * h + 8 * k;
      int isum = 0, imin = 0;
      for (int p = 0; p < 4; ++p) {
        const int2 a = __ldg(reinterpret_cast<const int2*>(xq + 32 * p));
        const int sc = (scales >> (8 * p)) & 0xff;
        const int dot = __dp4a(int((w1 >> (2 * p)) & 0x03030303u), a.y,
                               __dp4a(int((w0 >> (2 * p)) & 0x03030303u), a.x, 0));
        const int sum = __dp4a(0x01010101, a.y, __dp4a(0x01010101, a.x, 0));
        isum += (sc & 0xf) * dot;
        imin += (sc >> 4) * sum;
      }
      const float dx = __ldg(q.d + t * nb + block);
      acc[t] += __fmul_rn(d, dx) * float(isum) - __fmul_rn(dmin, dx) * float(imin);
    }
  }
};

// IQ4_XS (136-byte blocks, 8-byte aligned): d, scales_h, scales_l [4], qs [128]. Piece ib is
// the 32-element sub-block ib: qs bytes 16 ib .. + 15, low nibbles elements 0..15, high nibbles
// 16..31, each an index into kValuesIq4nl (quant/iq_tables.h), looked up with byte permutes
// from the table held in four registers (as llama.cpp's get_int_from_table_16).
template <uint32_t kT0, uint32_t kT1, uint32_t kT2, uint32_t kT3>
__device__ __forceinline__ int2 table16_lookup(uint32_t q4) {
  const uint32_t select_high = 0x32103210u | ((q4 & 0x88888888u) >> 1);
  uint32_t tmp[2];
  for (int i = 0; i < 2; ++i) {
    const uint32_t shift = 16 * i;
    const uint32_t low = __byte_perm(kT0, kT1, q4 >> shift);
    const uint32_t high = __byte_perm(kT2, kT3, q4 >> shift);
    tmp[i] = __byte_perm(low, high, select_high >> shift);
  }
  return make_int2(int(__byte_perm(tmp[0], tmp[1], 0x6420)),
                   int(__byte_perm(tmp[0], tmp[1], 0x7531)));
}
// kValuesIq4nl = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
// as bytes, four per word, little-endian.
__device__ __forceinline__ int2 iq4nl_lookup(uint32_t q4) {
  return table16_lookup<0xBFAD9881u, 0xF6EADDCFu, 0x26190D01u, 0x71594535u>(q4);
}
// kValuesMxfp4 = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}.
__device__ __forceinline__ int2 mxfp4_lookup(uint32_t q4) {
  return table16_lookup<0x03020100u, 0x0C080604u, 0xFDFEFF00u, 0xF4F8FAFCu>(q4);
}

template <int kTokens>
struct Int8Piece<QType::IQ4_XS, kTokens> {
  static constexpr int kBytes = 136;
  __device__ static void run(const uint8_t* b, int ib, const QuantizedRows& q, int64_t n_cols,
                             int64_t block, float* acc) {
    const uint2* qs = reinterpret_cast<const uint2*>(b + 8 + 16 * ib);
    const uint2 r0 = __ldg(qs), r1 = __ldg(qs + 1);
    const uint2 head = __ldg(reinterpret_cast<const uint2*>(b));  // d, scales_h, scales_l
    const float d = __half2float(__ushort_as_half(uint16_t(head.x & 0xffff)));
    const int low = (head.y >> (4 * ib)) & 0xf;
    const int high = (head.x >> (16 + 2 * ib)) & 3;
    const int scale = (low | (high << 4)) - 32;
    const uint32_t raw[4] = {r0.x, r0.y, r1.x, r1.y};
    uint32_t lo[4], hi[4];
    for (int k = 0; k < 4; ++k) {
      const int2 v = iq4nl_lookup(raw[k]);
      lo[k] = uint32_t(v.x), hi[k] = uint32_t(v.y);
    }
    const int64_t nb = n_cols / 256;
    for (int t = 0; t < kTokens; ++t) {
      const int4* xq = reinterpret_cast<const int4*>(q.qs + t * n_cols + block * 256 + 32 * ib);
      const int isum = dot4x4(hi, __ldg(xq + 1), dot4x4(lo, __ldg(xq), 0));
      const float dx = __ldg(q.d + t * nb + block);
      acc[t] += __fmul_rn(d, dx) * float(scale * isum);
    }
  }
};

// The warp's row: y[t * y_stride] = row . activations of token t. Shared by int8_matvec_kernel
// and the experts' by-id kernel (quant_expert_kernels.cuh), so both compute alike.
template <QType kType, int kTokens>
__device__ __forceinline__ void int8_matvec_row(const uint8_t* row_ptr, const QuantizedRows& q,
                                                int64_t n_cols, float* __restrict__ y,
                                                int64_t y_stride) {
  using Piece = Int8Piece<kType, kTokens>;
  const int lane = threadIdx.x % 32;
  const int64_t nb = n_cols / 256;
  float acc[kTokens] = {};
#pragma unroll 4
  for (int64_t block = lane / 8; block < nb; block += 4) {
    Piece::run(row_ptr + block * Piece::kBytes, lane % 8, q, n_cols, block, acc);
  }
  for (int t = 0; t < kTokens; ++t) {
    float s = acc[t];
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
    if (lane == 0) y[t * y_stride] = s;
  }
}

// Up to kMaxProducts matrices of one type and n_cols multiplied by the same quantized
// activations in one grid (q/k/v, gate/up; a plain matmul is the list of one): matrix i owns
// the blocks first_block[i] .. first_block[i + 1] - 1 of grid.x, kInt8RowsPerBlock rows each,
// and its warps run the same row body as a launch of that matrix alone would, so every output
// is the same bit for bit. A block never straddles two matrices.
constexpr int kMaxProducts = 4;
struct ProductList {
  const uint8_t* w[kMaxProducts];  // [n_rows[i], row_bytes]
  float* y[kMaxProducts];          // [n_tokens, n_rows[i]]
  int64_t n_rows[kMaxProducts];
  unsigned first_block[kMaxProducts + 1];  // first_block[n]: the grid's size
  int n;
};

// The matrix, row and row count of this warp. Constant indices only (the last matrix whose
// first block is at or below this one's wins: first_block rises), so the list stays in the
// parameter bank instead of being copied to local memory for a dynamic index.
struct ProductRow {
  const uint8_t* row_ptr;
  float* y;
  int64_t row, n_rows;
};
__device__ __forceinline__ ProductRow product_row(const ProductList& p, int64_t row_bytes) {
  const uint8_t* w = p.w[0];
  float* y = p.y[0];
  int64_t n_rows = p.n_rows[0];
  unsigned first = p.first_block[0];
#pragma unroll
  for (int i = 1; i < kMaxProducts; ++i) {
    if (i < p.n && blockIdx.x >= p.first_block[i]) {
      w = p.w[i], y = p.y[i], n_rows = p.n_rows[i], first = p.first_block[i];
    }
  }
  ProductRow r;
  r.row = int64_t(blockIdx.x - first) * kInt8RowsPerBlock + threadIdx.x / 32;
  r.n_rows = n_rows;
  r.row_ptr = w + r.row * row_bytes;
  r.y = y + r.row;
  return r;
}

template <QType kType, int kTokens>
__global__ void __launch_bounds__(kInt8Threads)
    int8_matvec_kernel(ProductList p, int64_t row_bytes, QuantizedRows q, int64_t n_cols) {
  const ProductRow r = product_row(p, row_bytes);
  if (r.row >= r.n_rows) return;  // whole warps leave: no block-wide barrier below
  wait_for_prerequisite();
  int8_matvec_row<kType, kTokens>(r.row_ptr, q, n_cols, r.y, r.n_rows);
  allow_dependent_launch();
}

// The 32-element types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4; blocks of 17-34 bytes,
// at best 4-byte aligned): lane L takes block 32i + L of the row. A warp stages its 32
// consecutive blocks in shared memory with aligned, coalesced 16-byte loads, then each lane
// unpacks its block from aligned 4-byte shared reads and funnel shifts (Block32<type>,
// quant_int8_pieces.cuh; 2-byte global loads would need 9-17 load instructions per block).
template <QType kType>
struct Block32;

// The warp's row, as int8_matvec_row; shared by staged32_matvec_kernel and the experts' by-id
// kernel. Only __syncwarp inside: warps of rows past the end may have left.
template <QType kType, int kTokens>
__device__ __forceinline__ void staged32_matvec_row(const uint8_t* row_ptr, const QuantizedRows& q,
                                                    int64_t n_cols, float* __restrict__ y,
                                                    int64_t y_stride) {
  using Block = Block32<kType>;
  // 16-byte words: 32 blocks, up to 15 bytes of alignment slack, and the word the last
  // funnel shift reads past the end.
  constexpr int kStageWords = (32 * Block::kBytes + 15) / 16 + 2;
  __shared__ uint4 stage[kInt8RowsPerBlock][kStageWords];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t n_blocks = n_cols / 32;
  const uint32_t* words = reinterpret_cast<const uint32_t*>(stage[warp]);
  float acc[kTokens] = {};
  for (int64_t blk0 = 0; blk0 < n_blocks; blk0 += 32) {
    const int count = n_blocks - blk0 < 32 ? int(n_blocks - blk0) : 32;
    const uint8_t* p = row_ptr + Block::kBytes * blk0;
    const uintptr_t aligned = reinterpret_cast<uintptr_t>(p) & ~uintptr_t(15);
    const int off = int(reinterpret_cast<uintptr_t>(p) - aligned);
    const int n_words = (off + Block::kBytes * count + 15) / 16;  // only this row's bytes
    for (int k = lane; k < n_words; k += 32) {
      stage[warp][k] = load_streaming16(reinterpret_cast<const uint4*>(aligned) + k);
    }
    __syncwarp();
    if (lane < count) {
      uint32_t lo[4], hi[4];
      float d = 0.0f, m = 0.0f;
      Block::unpack(words, off + Block::kBytes * lane, lo, hi, d, m);
      const int64_t blk = blk0 + lane;
      for (int t = 0; t < kTokens; ++t) {
        const int4* xq = reinterpret_cast<const int4*>(q.qs + t * n_cols + 32 * blk);
        const int isum = dot4x4(hi, __ldg(xq + 1), dot4x4(lo, __ldg(xq), 0));
        acc[t] += float(isum) * __fmul_rn(d, __ldg(q.d + t * n_blocks + blk));
        if constexpr (uses_q8_1(kType)) acc[t] += __fmul_rn(m, __ldg(q.s + t * n_blocks + blk));
      }
    }
    __syncwarp();
  }
  for (int t = 0; t < kTokens; ++t) {
    float s = acc[t];
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
    if (lane == 0) y[t * y_stride] = s;
  }
}

template <QType kType, int kTokens>
__global__ void __launch_bounds__(kInt8Threads)
    staged32_matvec_kernel(ProductList p, int64_t row_bytes, QuantizedRows q, int64_t n_cols) {
  const ProductRow r = product_row(p, row_bytes);
  if (r.row >= r.n_rows) return;  // whole warps leave; only __syncwarp below
  wait_for_prerequisite();
  staged32_matvec_row<kType, kTokens>(r.row_ptr, q, n_cols, r.y, r.n_rows);
  allow_dependent_launch();
}

}  // namespace
}  // namespace sluice::cuda::quant

#include "backend/cuda/quant_int8_cpu_order.cuh"

namespace sluice::cuda::quant {
namespace {

bool int8_launched(const char* kernel, std::string* error) {
  const cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) return true;
  if (error) *error = std::string("cuda ") + kernel + ": " + cudaGetErrorString(status);
  return false;
}

// Launches with programmatic stream serialization where the device has it (sm_90+).
template <class... Params, class... Args>
bool launch_after_quantize(void (*kernel)(Params...), dim3 grid, cudaStream_t stream,
                           std::string* error, Args... args) {
  const cudaError_t status =
      launch_dependent(kernel, grid, dim3(kInt8Threads), 0, stream, true, args...);
  if (status == cudaSuccess) return true;
  if (error) *error = std::string("cuda int8 matvec: ") + cudaGetErrorString(status);
  return false;
}

template <QType kType, int kTokens>
bool launch_int8_matvec_tokens(const ProductList& p, int64_t row_bytes, int64_t n_cols,
                               const QuantizedRows& q, CpuOrder order, bool tiled,
                               cudaStream_t stream, std::string* error) {
  const dim3 blocks(p.first_block[p.n]);
  if constexpr (activation_block(kType) == 32) {
    if (order == CpuOrder::kAvx512) {
      return launch_after_quantize(cpu_order32_matvec_kernel<kType, kTokens, true>, blocks, stream,
                                   error, p, row_bytes, q, n_cols);
    }
    if (order == CpuOrder::kAvx2) {
      return launch_after_quantize(cpu_order32_matvec_kernel<kType, kTokens, false>, blocks, stream,
                                   error, p, row_bytes, q, n_cols);
    }
    return launch_after_quantize(staged32_matvec_kernel<kType, kTokens>, blocks, stream, error, p,
                                 row_bytes, q, n_cols);
  } else {
    if constexpr (has_cpu_order_k(kType)) {
      if (tiled && order == CpuOrder::kAvx512) {
        return launch_after_quantize(cpu_tiled_k_matvec_kernel<kType, kTokens, false>, blocks,
                                     stream, error, p, row_bytes, q, n_cols);
      }
      if (tiled && order == CpuOrder::kAvx2) {
        return launch_after_quantize(cpu_tiled_k_matvec_kernel<kType, kTokens, true>, blocks,
                                     stream, error, p, row_bytes, q, n_cols);
      }
      if constexpr (!avx2_only_k(kType)) {
        if (order == CpuOrder::kAvx512) {
          return launch_after_quantize(cpu_order_k_matvec_kernel<kType, kTokens, true>, blocks,
                                       stream, error, p, row_bytes, q, n_cols);
        }
      }
      if (order != CpuOrder::kNone) {
        return launch_after_quantize(cpu_order_k_matvec_kernel<kType, kTokens, false>, blocks,
                                     stream, error, p, row_bytes, q, n_cols);
      }
    }
    return launch_after_quantize(int8_matvec_kernel<kType, kTokens>, blocks, stream, error, p,
                                 row_bytes, q, n_cols);
  }
}

// Quantizes a.x into `out` (scratch_bytes(a.n_tokens, a.n_cols, activation_block(kType))
// bytes, 16-byte aligned) in the activation format of kType; only enqueues.
template <QType kType>
bool quantize_int8_activations(const MatmulArgs& a, void* out, std::string* error) {
  constexpr int kActBlock = activation_block(kType);
  const QuantizedRows q = split_scratch(out, a.n_tokens, a.n_cols, kActBlock);
  const int64_t n_blocks = a.n_tokens * (a.n_cols / kActBlock);
  const unsigned grid = unsigned((n_blocks + kQuantizeWarps - 1) / kQuantizeWarps);
  const auto stream = static_cast<cudaStream_t>(a.stream);
  if constexpr (kActBlock == 256) {
    launch_chained(quantize_q8_k_kernel, dim3(grid), dim3(32 * kQuantizeWarps), 0, stream, a.x,
                   n_blocks, q);
  } else {
    launch_chained(quantize_q8_0_kernel<uses_q8_1(kType)>, dim3(grid), dim3(32 * kQuantizeWarps), 0,
                   stream, a.x, n_blocks, q);
  }
  return int8_launched("quantize activations", error);
}

// The integer matvecs of the list over activations already quantized for kType at `quantized`:
// one launch.
template <QType kType>
bool run_int8_product_list(const ProductList& p, int64_t row_bytes, int64_t n_cols,
                           int64_t n_tokens, const void* quantized, CpuOrder order, bool tiled,
                           void* stream_handle, std::string* error) {
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  const QuantizedRows q =
      split_scratch(const_cast<void*>(quantized), n_tokens, n_cols, activation_block(kType));
  switch (n_tokens) {
    case 1:
      return launch_int8_matvec_tokens<kType, 1>(p, row_bytes, n_cols, q, order, tiled, stream,
                                                 error);
    case 2:
      return launch_int8_matvec_tokens<kType, 2>(p, row_bytes, n_cols, q, order, tiled, stream,
                                                 error);
    case 3:
      return launch_int8_matvec_tokens<kType, 3>(p, row_bytes, n_cols, q, order, tiled, stream,
                                                 error);
    case 4:
      return launch_int8_matvec_tokens<kType, 4>(p, row_bytes, n_cols, q, order, tiled, stream,
                                                 error);
    case 5:
      return launch_int8_matvec_tokens<kType, 5>(p, row_bytes, n_cols, q, order, tiled, stream,
                                                 error);
    case 6:
      return launch_int8_matvec_tokens<kType, 6>(p, row_bytes, n_cols, q, order, tiled, stream,
                                                 error);
    case 7:
      return launch_int8_matvec_tokens<kType, 7>(p, row_bytes, n_cols, q, order, tiled, stream,
                                                 error);
    default:
      return launch_int8_matvec_tokens<kType, 8>(p, row_bytes, n_cols, q, order, tiled, stream,
                                                 error);
  }
}

// Appends matrix (w, n_rows) writing y to the list.
inline void push_product(ProductList& p, const void* w, int64_t n_rows, float* y) {
  p.w[p.n] = static_cast<const uint8_t*>(w);
  p.y[p.n] = y;
  p.n_rows[p.n] = n_rows;
  p.first_block[p.n + 1] =
      p.first_block[p.n] + unsigned((n_rows + kInt8RowsPerBlock - 1) / kInt8RowsPerBlock);
  ++p.n;
}

// One matrix's product (matmul, matmul_quantized).
template <QType kType>
bool run_int8_product(const MatmulArgs& a, const void* quantized, std::string* error) {
  ProductList p = {};
  push_product(p, a.w, a.n_rows, a.y);
  return run_int8_product_list<kType>(p, a.row_bytes, a.n_cols, a.n_tokens, quantized, a.cpu_order,
                                      a.cpu_tiled, a.stream, error);
}

// matmul_quantized_many: the products in lists of up to kMaxProducts, one launch per list.
template <QType kType>
bool run_int8_products(const SharedInputArgs& a, std::string* error) {
  for (size_t first = 0; first < a.n; first += kMaxProducts) {
    ProductList p = {};
    for (size_t i = first; i < a.n && i < first + kMaxProducts; ++i) {
      push_product(p, a.w[i], a.n_rows[i], a.y[i]);
    }
    if (!run_int8_product_list<kType>(p, a.row_bytes, a.n_cols, a.n_tokens, a.quantized,
                                      a.cpu_order, a.cpu_tiled, a.stream, error)) {
      return false;
    }
  }
  return true;
}

// matmul's decode: quantizes the activations into the stream's scratch (quant_scratch.cu),
// then runs the integer matvec; or, when the caller quantized them already
// (a.quantized, quant_matmul.h: matmul_quantized), only the matvec. Both only enqueue.
template <QType kType>
bool run_int8_matvec(const MatmulArgs& a, std::string* error) {
  if (a.quantized) return run_int8_product<kType>(a, a.quantized, error);
  void* scratch = nullptr;
  if (!activation_scratch(a.stream, scratch_bytes(a.n_tokens, a.n_cols, activation_block(kType)),
                          &scratch, error) ||
      !quantize_int8_activations<kType>(a, scratch, error)) {
    return false;
  }
  return run_int8_product<kType>(a, scratch, error);
}

}  // namespace
}  // namespace sluice::cuda::quant
