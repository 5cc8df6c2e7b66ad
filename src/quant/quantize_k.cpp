// Packing of the K-quant fits (quantize_k_fit.h) into GGUF's block layouts. Each layout is
// documented where it is written; the bit positions must match gguf-py's and ggml's
// dequantizers exactly, which tests/e2e/test_kquant_rmse.py checks through gguf-py.
#include "quant/quantize_k.h"

#include <cstring>

#include "core/error.h"
#include "quant/quantize_k_fit.h"

namespace sluice {
namespace {

using kquant::AffineFit;
using kquant::AffineSpec;
using kquant::SymmetricFit;
using kquant::SymmetricSpec;

// How far each sub-block's scale code search reaches beyond the float fit (and the previous
// round's code). Measured on tools/kquant_dataset.py: past these radii the error falls by less
// than 0.1% while the time grows linearly. The 8-bit codes of Q6_K gain the most from a wide
// search, because its 64 levels make the error a bumpy function of the sub-block scale.
constexpr AffineSpec kQ2{16, 3, 15, 3};
constexpr SymmetricSpec kQ3{16, -4, 3, -32, 31, 3};
constexpr AffineSpec kQ4{32, 15, 63, 6};
constexpr AffineSpec kQ5{32, 31, 63, 8};
constexpr SymmetricSpec kQ6{16, -32, 31, -128, 127, 24};

int64_t block_count(int64_t n, const char* type) {
  if (n < 0 || n % kQK_K != 0) {
    fail("quantize_row_", type, ": row of ", n, " elements is not a multiple of ", kQK_K);
  }
  return n / kQK_K;
}

// Q4_K / Q5_K pack 8 six-bit scales and mins into 12 bytes: bytes 0-3 hold scales 0-3 and,
// in their top two bits, the high bits of scales 4-7; bytes 4-7 likewise for the mins;
// bytes 8-11 hold the low nibbles of scale (low half) and min (high half) 4-7.
void pack_scale_min(const AffineFit& f, uint8_t out[kKScaleSize]) {
  for (int j = 0; j < 4; ++j) {
    out[j] = uint8_t(f.sc[j] | ((f.sc[j + 4] >> 4) << 6));
    out[j + 4] = uint8_t(f.mc[j] | ((f.mc[j + 4] >> 4) << 6));
    out[j + 8] = uint8_t((f.sc[j + 4] & 0x0f) | ((f.mc[j + 4] & 0x0f) << 4));
  }
}

// Q2_K / Q3_K 2-bit planes: in each 128-element half, byte m of the half's 32 holds elements
// m, m+32, m+64, m+96 at bit offsets 0, 2, 4, 6.
template <class Level>
void pack_2bit_planes(const Level* levels, uint8_t qs[kQK_K / 4]) {
  for (int half = 0; half < 2; ++half) {
    for (int m = 0; m < 32; ++m) {
      const Level* l = levels + half * 128 + m;
      qs[half * 32 + m] =
          uint8_t((l[0] & 3) | ((l[32] & 3) << 2) | ((l[64] & 3) << 4) | ((l[96] & 3) << 6));
    }
  }
}

}  // namespace

void quantize_row_q2_k(const float* src, BlockQ2_K* dst, int64_t n) {
  const int64_t nb = block_count(n, "q2_k");
  for (int64_t b = 0; b < nb; ++b, src += kQK_K) {
    AffineFit f;
    kquant::fit_affine(src, kQ2, f);
    BlockQ2_K& out = dst[b];
    for (int j = 0; j < kQK_K / 16; ++j) out.scales[j] = uint8_t(f.sc[j] | (f.mc[j] << 4));
    pack_2bit_planes(f.q, out.qs);
    out.d = f.d;
    out.dmin = f.dmin;
  }
}

void quantize_row_q3_k(const float* src, BlockQ3_K* dst, int64_t n) {
  const int64_t nb = block_count(n, "q3_k");
  for (int64_t b = 0; b < nb; ++b, src += kQK_K) {
    SymmetricFit f;
    kquant::fit_symmetric(src, kQ3, f);
    BlockQ3_K& out = dst[b];
    // Levels are stored biased by 4: the low two bits in 2-bit planes, the third bit in
    // hmask (element e at byte e % 32, bit e / 32).
    uint8_t biased[kQK_K];
    std::memset(out.hmask, 0, sizeof out.hmask);
    for (int e = 0; e < kQK_K; ++e) {
      biased[e] = uint8_t(f.q[e] + 4);
      if (biased[e] & 4) out.hmask[e % 32] |= uint8_t(1u << (e / 32));
    }
    pack_2bit_planes(biased, out.qs);
    // Sixteen 6-bit codes biased by 32: low nibbles of codes j and j+8 share byte j, the top
    // two bits of code j sit in byte 8 + j % 4 at bit offset 2 * (j / 4).
    std::memset(out.scales, 0, sizeof out.scales);
    for (int j = 0; j < 16; ++j) {
      const uint8_t code = uint8_t(f.sc[j] + 32);
      out.scales[j % 8] |= uint8_t((code & 0x0f) << (j < 8 ? 0 : 4));
      out.scales[8 + j % 4] |= uint8_t((code >> 4) << (2 * (j / 4)));
    }
    out.d = f.d;
  }
}

void quantize_row_q4_k(const float* src, BlockQ4_K* dst, int64_t n) {
  const int64_t nb = block_count(n, "q4_k");
  for (int64_t b = 0; b < nb; ++b, src += kQK_K) {
    AffineFit f;
    kquant::fit_affine(src, kQ4, f);
    BlockQ4_K& out = dst[b];
    out.d = f.d;
    out.dmin = f.dmin;
    pack_scale_min(f, out.scales);
    // Each 64-element chunk: byte m of its 32 holds element m (low nibble) and m+32 (high).
    for (int c = 0; c < 4; ++c) {
      for (int m = 0; m < 32; ++m) {
        out.qs[c * 32 + m] = uint8_t(f.q[c * 64 + m] | (f.q[c * 64 + m + 32] << 4));
      }
    }
  }
}

void quantize_row_q5_k(const float* src, BlockQ5_K* dst, int64_t n) {
  const int64_t nb = block_count(n, "q5_k");
  for (int64_t b = 0; b < nb; ++b, src += kQK_K) {
    AffineFit f;
    kquant::fit_affine(src, kQ5, f);
    BlockQ5_K& out = dst[b];
    out.d = f.d;
    out.dmin = f.dmin;
    pack_scale_min(f, out.scales);
    // Low nibbles as Q4_K; the fifth bit of element c*64 + m goes to qh[m] bit 2c, that of
    // element c*64 + 32 + m to bit 2c + 1.
    std::memset(out.qh, 0, sizeof out.qh);
    for (int c = 0; c < 4; ++c) {
      for (int m = 0; m < 32; ++m) {
        const uint8_t lo = f.q[c * 64 + m], hi = f.q[c * 64 + m + 32];
        out.qs[c * 32 + m] = uint8_t((lo & 0x0f) | ((hi & 0x0f) << 4));
        out.qh[m] |= uint8_t(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      }
    }
  }
}

void quantize_row_q6_k(const float* src, BlockQ6_K* dst, int64_t n) {
  const int64_t nb = block_count(n, "q6_k");
  for (int64_t b = 0; b < nb; ++b, src += kQK_K) {
    SymmetricFit f;
    kquant::fit_symmetric(src, kQ6, f);
    BlockQ6_K& out = dst[b];
    // Levels biased by 32. In each 128-element half, for m < 32: ql[m] holds elements m (low
    // nibble) and m+64 (high), ql[m+32] elements m+32 and m+96; qh[m] the top two bits of
    // m, m+32, m+64, m+96 at bit offsets 0, 2, 4, 6.
    for (int half = 0; half < 2; ++half) {
      uint8_t* ql = out.ql + half * 64;
      uint8_t* qh = out.qh + half * 32;
      const int8_t* q = f.q + half * 128;
      for (int m = 0; m < 32; ++m) {
        const uint8_t l0 = uint8_t(q[m] + 32), l1 = uint8_t(q[m + 32] + 32);
        const uint8_t l2 = uint8_t(q[m + 64] + 32), l3 = uint8_t(q[m + 96] + 32);
        ql[m] = uint8_t((l0 & 0x0f) | ((l2 & 0x0f) << 4));
        ql[m + 32] = uint8_t((l1 & 0x0f) | ((l3 & 0x0f) << 4));
        qh[m] = uint8_t((l0 >> 4) | ((l1 >> 4) << 2) | ((l2 >> 4) << 4) | ((l3 >> 4) << 6));
      }
    }
    for (int j = 0; j < 16; ++j) out.scales[j] = f.sc[j];
    out.d = f.d;
  }
}

}  // namespace sluice
