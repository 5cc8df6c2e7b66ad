// AVX2 kernel of the tiled K-quant matmul (tiled_kquant.h states the arithmetic it must keep).
// Work is split into 16 weight rows x 8 tokens x one 256-element block: the 16 rows' blocks are
// decoded once into int8 values and per-16 scales, then reused by every group of 8 tokens.
// For one row and 8 tokens the 32-byte chunks accumulate maddubs/madd products per token; a
// transposing horizontal sum leaves the 8 integer block sums in one vector, so the float steps
// run 8 tokens wide. Accumulators live in a 16 x 256-token window on the stack.
//
// Packed activations, per (block, group of 8 tokens), kSegment bytes:
//   [0, 2048)     the 8 tokens' 256 codes (each +128 when the type multiplies biased codes)
//   [2048, 2080)  their 8 float scales d
//   [2080, 2336)  per pair p of 16-element groups, 8 tokens x {bsum[2p], bsum[2p+1]} int16
#include "backend/cpu/avx2_util.h"
#include "backend/cpu/tiled_kquant.h"
#include "quant/blocks.h"
#include "quant/iq_tables.h"

namespace sluice::cpu {
namespace {

constexpr int kBlock = 256;
constexpr int kGroup = 8;          // tokens per packed group: one float lane each
constexpr int kRows = 16;          // weight rows decoded together
constexpr int kWindowGroups = 32;  // token groups per accumulator window (256 tokens)
constexpr int kCodesBytes = kGroup * kBlock;
constexpr int kScalesOffset = kCodesBytes;
constexpr int kBsumsOffset = kScalesOffset + kGroup * 4;
constexpr int kSegment = kBsumsOffset + 8 * kGroup * 4;
static_assert(kSegment == 2336, "tiled_kquant.cpp's kSegment must match");

// How a chunk's int16 pair sums of w * q are formed with maddubs (u8 x s8), exactly:
//  kUnsignedWeight: w >= 0 (Q2_K, Q4_K, Q5_K) is the unsigned side, the codes the signed one;
//  kBiasedCodes: codes + 128 are the unsigned side and |w| <= 64 keeps pairs below 2^15
//    (Q3_K, Q6_K, IQ grids); 128 * sum(scale * w) per row is subtracted afterwards;
//  kSignTrick: IQ4_XS's |w| reaches 127, so |w| against the codes carrying w's sign.
enum class Mac { kUnsignedWeight, kBiasedCodes, kSignTrick };

// One weight row's block as integers: value of each element, scale and minimum per 16.
struct BlockValues {
  int8_t w[kBlock];
  int16_t scale[16];
  int16_t min[16];
  float d;
  float dmin;
};

using DecodeFn = void (*)(const void* block, BlockValues& out);

// Local, not std::min: no inline function of a shared header is instantiated in an ISA file.
int64_t smaller(int64_t a, int64_t b) {
  return a < b ? a : b;
}

float half(uint16_t h) {
  return _cvtsh_ss(h);
}

void k4_scales_mins(const uint8_t* packed, BlockValues& out) {
  for (int j = 0; j < 8; ++j) {
    int scale, min;
    if (j < 4) {
      scale = packed[j] & 63;
      min = packed[j + 4] & 63;
    } else {
      scale = (packed[j + 4] & 0xf) | ((packed[j - 4] >> 6) << 4);
      min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
    }
    out.scale[2 * j] = out.scale[2 * j + 1] = int16_t(scale);
    out.min[2 * j] = out.min[2 * j + 1] = int16_t(min);
  }
}

void decode_q4_k(const void* block, BlockValues& out) {
  const auto& x = *static_cast<const BlockQ4_K*>(block);
  out.d = half(x.d), out.dmin = half(x.dmin);
  k4_scales_mins(x.scales, out);
  for (int j = 0; j < 4; ++j) {
    for (int l = 0; l < 32; ++l) {
      out.w[64 * j + l] = int8_t(x.qs[32 * j + l] & 0xf);
      out.w[64 * j + 32 + l] = int8_t(x.qs[32 * j + l] >> 4);
    }
  }
}

void decode_q5_k(const void* block, BlockValues& out) {
  const auto& x = *static_cast<const BlockQ5_K*>(block);
  out.d = half(x.d), out.dmin = half(x.dmin);
  k4_scales_mins(x.scales, out);
  for (int sub = 0; sub < 8; ++sub) {
    const int shift = 4 * (sub % 2);
    for (int l = 0; l < 32; ++l) {
      const int low = (x.qs[32 * (sub / 2) + l] >> shift) & 0xf;
      out.w[32 * sub + l] = int8_t(low | (((x.qh[l] >> sub) & 1) << 4));
    }
  }
}

void decode_q6_k(const void* block, BlockValues& out) {
  const auto& x = *static_cast<const BlockQ6_K*>(block);
  out.d = half(x.d), out.dmin = 0.0f;
  for (int half_block = 0; half_block < 2; ++half_block) {
    const uint8_t* ql = x.ql + 64 * half_block;
    const uint8_t* qh = x.qh + 32 * half_block;
    int8_t* w = out.w + 128 * half_block;
    for (int l = 0; l < 32; ++l) {
      w[l] = int8_t(((ql[l] & 0xf) | ((qh[l] & 3) << 4)) - 32);
      w[l + 32] = int8_t(((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32);
      w[l + 64] = int8_t(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      w[l + 96] = int8_t(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
  for (int g = 0; g < 16; ++g) out.scale[g] = x.scales[g];
}

// Q2_K and Q3_K: byte l of 32-byte half h holds elements 128h + 32s + l at shift 2s.
int two_bits(const uint8_t* qs, int e) {
  const int group = e / 32;
  return (qs[32 * (group / 4) + e % 32] >> (2 * (group % 4))) & 3;
}

void decode_q2_k(const void* block, BlockValues& out) {
  const auto& x = *static_cast<const BlockQ2_K*>(block);
  out.d = half(x.d), out.dmin = half(x.dmin);
  for (int e = 0; e < kBlock; ++e) out.w[e] = int8_t(two_bits(x.qs, e));
  for (int g = 0; g < 16; ++g) {
    out.scale[g] = int16_t(x.scales[g] & 0xf);
    out.min[g] = int16_t(x.scales[g] >> 4);
  }
}

void decode_q3_k(const void* block, BlockValues& out) {
  const auto& x = *static_cast<const BlockQ3_K*>(block);
  out.d = half(x.d), out.dmin = 0.0f;
  for (int e = 0; e < kBlock; ++e) {
    const bool high = (x.hmask[e % 32] >> (e / 32)) & 1;
    out.w[e] = int8_t(two_bits(x.qs, e) - (high ? 0 : 4));
  }
  for (int g = 0; g < 16; ++g) {
    const int low = g < 8 ? (x.scales[g] & 0xf) : (x.scales[g - 8] >> 4);
    const int high = (x.scales[8 + (g % 4)] >> (2 * (g / 4))) & 3;
    out.scale[g] = int16_t((low | (high << 4)) - 32);
  }
}

void decode_iq4_xs(const void* block, BlockValues& out) {
  const auto& x = *static_cast<const BlockIQ4_XS*>(block);
  out.d = half(x.d), out.dmin = 0.0f;
  for (int ib = 0; ib < 8; ++ib) {
    const int low = (x.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf;
    const int high = (x.scales_h >> (2 * ib)) & 3;
    out.scale[2 * ib] = out.scale[2 * ib + 1] = int16_t((low | (high << 4)) - 32);
    for (int j = 0; j < 16; ++j) {
      out.w[32 * ib + j] = kValuesIq4nl[x.qs[16 * ib + j] & 0xf];
      out.w[32 * ib + 16 + j] = kValuesIq4nl[x.qs[16 * ib + j] >> 4];
    }
  }
}

// Eight grid magnitudes (one per byte of `row`) with the signs of `signs`' bits.
void signed_grid8(uint64_t row, uint8_t signs, int8_t* w) {
  for (int j = 0; j < 8; ++j) {
    const int magnitude = int((row >> (8 * j)) & 0xff);
    w[j] = int8_t((signs & kKmaskIq2xs[j]) ? -magnitude : magnitude);
  }
}

void decode_iq2_xxs(const void* block, BlockValues& out) {
  const auto& x = *static_cast<const BlockIQ2_XXS*>(block);
  out.d = half(x.d) * 0.125f, out.dmin = 0.0f;
  for (int ib = 0; ib < 8; ++ib) {
    uint32_t aux[2];
    std::memcpy(aux, x.qs + 4 * ib, sizeof(aux));
    out.scale[2 * ib] = out.scale[2 * ib + 1] = int16_t(2 * (aux[1] >> 28) + 1);
    for (int l = 0; l < 4; ++l) {
      signed_grid8(kIq2xxsGrid[(aux[0] >> (8 * l)) & 0xff], kKsignsIq2xs[(aux[1] >> (7 * l)) & 127],
                   out.w + 32 * ib + 8 * l);
    }
  }
}

void decode_iq2_xs(const void* block, BlockValues& out) {
  const auto& x = *static_cast<const BlockIQ2_XS*>(block);
  out.d = half(x.d) * 0.125f, out.dmin = 0.0f;
  for (int ib = 0; ib < 8; ++ib) {
    out.scale[2 * ib] = int16_t(2 * (x.scales[ib] & 0xf) + 1);
    out.scale[2 * ib + 1] = int16_t(2 * (x.scales[ib] >> 4) + 1);
    for (int l = 0; l < 4; ++l) {
      const uint16_t q = x.qs[4 * ib + l];
      signed_grid8(kIq2xsGrid[q & 511], kKsignsIq2xs[q >> 9], out.w + 32 * ib + 8 * l);
    }
  }
}

void decode_iq2_s(const void* block, BlockValues& out) {
  const auto& x = *static_cast<const BlockIQ2_S*>(block);
  out.d = half(x.d) * 0.125f, out.dmin = 0.0f;
  const uint8_t* signs = x.qs + kBlock / 8;
  for (int ib = 0; ib < 8; ++ib) {
    out.scale[2 * ib] = int16_t(2 * (x.scales[ib] & 0xf) + 1);
    out.scale[2 * ib + 1] = int16_t(2 * (x.scales[ib] >> 4) + 1);
    for (int l = 0; l < 4; ++l) {
      const int index = x.qs[4 * ib + l] | ((x.qh[ib] << (8 - 2 * l)) & 0x300);
      signed_grid8(kIq2sGrid[index], signs[4 * ib + l], out.w + 32 * ib + 8 * l);
    }
  }
}

uint64_t two_grid4(uint32_t first, uint32_t second) {
  return uint64_t(first) | (uint64_t(second) << 32);
}

void decode_iq3_xxs(const void* block, BlockValues& out) {
  const auto& x = *static_cast<const BlockIQ3_XXS*>(block);
  out.d = half(x.d) * 0.25f, out.dmin = 0.0f;
  const uint8_t* scales_and_signs = x.qs + kBlock / 4;
  for (int ib = 0; ib < 8; ++ib) {
    uint32_t aux;
    std::memcpy(&aux, scales_and_signs + 4 * ib, sizeof(aux));
    out.scale[2 * ib] = out.scale[2 * ib + 1] = int16_t(2 * (aux >> 28) + 1);
    for (int l = 0; l < 4; ++l) {
      const uint64_t row =
          two_grid4(kIq3xxsGrid[x.qs[8 * ib + 2 * l]], kIq3xxsGrid[x.qs[8 * ib + 2 * l + 1]]);
      signed_grid8(row, kKsignsIq2xs[(aux >> (7 * l)) & 127], out.w + 32 * ib + 8 * l);
    }
  }
}

void decode_iq3_s(const void* block, BlockValues& out) {
  const auto& x = *static_cast<const BlockIQ3_S*>(block);
  out.d = half(x.d), out.dmin = 0.0f;
  for (int ib = 0; ib < 8; ++ib) {
    out.scale[2 * ib] = out.scale[2 * ib + 1] =
        int16_t(2 * ((x.scales[ib / 2] >> (4 * (ib % 2))) & 0xf) + 1);
    const uint8_t* qs = x.qs + 8 * ib;
    const int qh = x.qh[ib];
    for (int l = 0; l < 4; ++l) {
      const uint64_t row = two_grid4(kIq3sGrid[qs[2 * l] | ((qh << (8 - 2 * l)) & 256)],
                                     kIq3sGrid[qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256)]);
      signed_grid8(row, x.signs[4 * ib + l], out.w + 32 * ib + 8 * l);
    }
  }
}

// IQ1 grids hold -1/0/1; with the +-1/8 delta a value is (8 * grid + delta) / 8, the 1/8 in d.
void ternary_grid8(uint64_t row, int delta, int8_t* w) {
  for (int j = 0; j < 8; ++j) w[j] = int8_t(8 * int8_t((row >> (8 * j)) & 0xff) + delta);
}

void decode_iq1_s(const void* block, BlockValues& out) {
  const auto& x = *static_cast<const BlockIQ1_S*>(block);
  out.d = half(x.d) * 0.125f, out.dmin = 0.0f;
  for (int ib = 0; ib < 8; ++ib) {
    const int qh = x.qh[ib];
    out.scale[2 * ib] = out.scale[2 * ib + 1] = int16_t(2 * ((qh >> 12) & 7) + 1);
    const int delta = (qh & 0x8000) ? -1 : 1;
    for (int l = 0; l < 4; ++l) {
      const uint64_t row = kIq1sGrid[x.qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)];
      ternary_grid8(row, delta, out.w + 32 * ib + 8 * l);
    }
  }
}

void decode_iq1_m(const void* block, BlockValues& out) {
  const auto& x = *static_cast<const BlockIQ1_M*>(block);
  uint16_t sc[4];
  std::memcpy(sc, x.scales, sizeof(sc));
  const auto d_bits = uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) |
                               (sc[3] & 0xf000));
  out.d = half(d_bits) * 0.125f, out.dmin = 0.0f;
  for (int ib = 0; ib < 8; ++ib) {
    const uint8_t* qh = x.qh + 2 * ib;
    const int shift = 6 * (ib % 2);
    out.scale[2 * ib] = int16_t(2 * ((sc[ib / 2] >> shift) & 7) + 1);
    out.scale[2 * ib + 1] = int16_t(2 * ((sc[ib / 2] >> (shift + 3)) & 7) + 1);
    for (int l = 0; l < 4; ++l) {
      const int bits = l % 2 == 0 ? qh[l / 2] : qh[l / 2] >> 4;
      const uint64_t row = kIq1sGrid[x.qs[4 * ib + l] | ((bits & 7) << 8)];
      ternary_grid8(row, (bits & 8) ? -1 : 1, out.w + 32 * ib + 8 * l);
    }
  }
}

struct TypeInfo {
  DecodeFn decode = nullptr;
  Mac mac = Mac::kUnsignedWeight;  // exactly the types with minimums use kUnsignedWeight
  size_t block_bytes = 0;
};

TypeInfo type_info(QType type) {
  switch (type) {
    case QType::Q2_K:
      return {decode_q2_k, Mac::kUnsignedWeight, sizeof(BlockQ2_K)};
    case QType::Q3_K:
      return {decode_q3_k, Mac::kBiasedCodes, sizeof(BlockQ3_K)};
    case QType::Q4_K:
      return {decode_q4_k, Mac::kUnsignedWeight, sizeof(BlockQ4_K)};
    case QType::Q5_K:
      return {decode_q5_k, Mac::kUnsignedWeight, sizeof(BlockQ5_K)};
    case QType::Q6_K:
      return {decode_q6_k, Mac::kBiasedCodes, sizeof(BlockQ6_K)};
    case QType::IQ4_XS:
      return {decode_iq4_xs, Mac::kSignTrick, sizeof(BlockIQ4_XS)};
    case QType::IQ2_XXS:
      return {decode_iq2_xxs, Mac::kBiasedCodes, sizeof(BlockIQ2_XXS)};
    case QType::IQ2_XS:
      return {decode_iq2_xs, Mac::kBiasedCodes, sizeof(BlockIQ2_XS)};
    case QType::IQ2_S:
      return {decode_iq2_s, Mac::kBiasedCodes, sizeof(BlockIQ2_S)};
    case QType::IQ3_XXS:
      return {decode_iq3_xxs, Mac::kBiasedCodes, sizeof(BlockIQ3_XXS)};
    case QType::IQ3_S:
      return {decode_iq3_s, Mac::kBiasedCodes, sizeof(BlockIQ3_S)};
    case QType::IQ1_S:
      return {decode_iq1_s, Mac::kBiasedCodes, sizeof(BlockIQ1_S)};
    case QType::IQ1_M:
      return {decode_iq1_m, Mac::kBiasedCodes, sizeof(BlockIQ1_M)};
    default:
      return {};  // callers check tiled_kquant_type first
  }
}

// kRows decoded rows laid out for the kernel.
struct RowTile {
  alignas(32) int8_t w[kRows][kBlock];
  alignas(32) int16_t scale[kRows][kBlock / 2];  // chunk c: 8 x scale of group 2c, 8 x 2c+1
  alignas(32) int32_t min_pair[kRows][8];        // min of group 2p | min of 2p+1 << 16
  float d[kRows];
  float dmin[kRows];
  int32_t bias_correction[kRows];  // kBiasedCodes: 128 * sum_g scale_g * sum_{e in g} w_e
};

void fill_row(const BlockValues& v, RowTile& tile, int r) {
  std::memcpy(tile.w[r], v.w, kBlock);
  int32_t correction = 0;
  for (int g = 0; g < 16; ++g) {
    for (int lane = 0; lane < 8; ++lane) tile.scale[r][8 * g + lane] = v.scale[g];
    int32_t sum = 0;
    for (int e = 16 * g; e < 16 * g + 16; ++e) sum += v.w[e];
    correction += 128 * int32_t(v.scale[g]) * sum;
  }
  for (int p = 0; p < 8; ++p) {
    tile.min_pair[r][p] =
        int32_t(uint32_t(uint16_t(v.min[2 * p])) | (uint32_t(uint16_t(v.min[2 * p + 1])) << 16));
  }
  tile.d[r] = v.d;
  tile.dmin[r] = v.dmin;
  tile.bias_correction[r] = correction;
}

// Lane t = the sum of all lanes of v[t].
__m256i transpose_sum8(const __m256i v[8]) {
  const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                          _mm256_permute2x128_si256(a, b, 0x31));
}

// One row r of the tile against one packed group of 8 tokens: acc[t] = fma(res_t, d_t, acc[t])
// (kFused) or acc[t] + res_t * d_t.
template <Mac M, bool kMin, bool kFused>
void row_times_group(const RowTile& tile, int r, const uint8_t* segment, float* acc) {
  __m256i sums[kGroup];
  for (auto& s : sums) s = _mm256_setzero_si256();
  for (int c = 0; c < kBlock / 32; ++c) {
    const __m256i w = loadu256(tile.w[r] + 32 * c);
    const __m256i scale = loadu256(tile.scale[r] + 16 * c);
    const __m256i w_abs = M == Mac::kSignTrick ? _mm256_sign_epi8(w, w) : w;
    for (int t = 0; t < kGroup; ++t) {
      const __m256i codes = loadu256(segment + kBlock * t + 32 * c);
      __m256i pairs;
      if constexpr (M == Mac::kUnsignedWeight) {
        pairs = _mm256_maddubs_epi16(w, codes);
      } else if constexpr (M == Mac::kBiasedCodes) {
        pairs = _mm256_maddubs_epi16(codes, w);
      } else {
        pairs = _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(codes, w));
      }
      sums[t] = _mm256_add_epi32(sums[t], _mm256_madd_epi16(pairs, scale));
    }
  }
  __m256i s1 = transpose_sum8(sums);
  if constexpr (M == Mac::kBiasedCodes) {
    s1 = _mm256_sub_epi32(s1, _mm256_set1_epi32(tile.bias_correction[r]));
  }
  __m256 res = _mm256_mul_ps(_mm256_set1_ps(tile.d[r]), _mm256_cvtepi32_ps(s1));
  if constexpr (kMin) {
    const uint8_t* bsums = segment + kBsumsOffset;
    __m256i s2 = _mm256_setzero_si256();
    for (int p = 0; p < 8; ++p) {
      s2 = _mm256_add_epi32(
          s2, _mm256_madd_epi16(loadu256(bsums + 32 * p), _mm256_set1_epi32(tile.min_pair[r][p])));
    }
    res = _mm256_fnmadd_ps(_mm256_set1_ps(tile.dmin[r]), _mm256_cvtepi32_ps(s2), res);
  }
  const __m256 d_x = _mm256_loadu_ps(reinterpret_cast<const float*>(segment + kScalesOffset));
  const __m256 before = _mm256_loadu_ps(acc);
  if constexpr (kFused) {
    _mm256_storeu_ps(acc, _mm256_fmadd_ps(res, d_x, before));
  } else {
    _mm256_storeu_ps(acc, _mm256_add_ps(before, _mm256_mul_ps(res, d_x)));
  }
}

template <Mac M, bool kMin, bool kFused>
void tiled_rows(DecodeFn decode, size_t block_bytes, const uint8_t* weights, int64_t w_row,
                int64_t row_lo, int64_t row_hi, const uint8_t* packed, int64_t n_tokens,
                int64_t n_cols, float* y, int64_t y_stride) {
  const int64_t n_blocks = n_cols / kBlock;
  const int64_t n_groups = (n_tokens + kGroup - 1) / kGroup;
  RowTile tile;
  BlockValues values;
  alignas(32) float acc[kRows][kWindowGroups * kGroup];
  for (int64_t r0 = row_lo; r0 < row_hi; r0 += kRows) {
    const int n_r = int(smaller(kRows, row_hi - r0));
    for (int64_t g0 = 0; g0 < n_groups; g0 += kWindowGroups) {
      const int n_g = int(smaller(kWindowGroups, n_groups - g0));
      for (int r = 0; r < n_r; ++r) std::memset(acc[r], 0, sizeof(float) * kGroup * n_g);
      for (int64_t b = 0; b < n_blocks; ++b) {
        for (int r = 0; r < n_r; ++r) {
          decode(weights + (r0 + r) * w_row + b * int64_t(block_bytes), values);
          fill_row(values, tile, r);
        }
        const uint8_t* segments = packed + (b * n_groups + g0) * kSegment;
        for (int g = 0; g < n_g; ++g) {
          for (int r = 0; r < n_r; ++r) {
            row_times_group<M, kMin, kFused>(tile, r, segments + g * kSegment, acc[r] + kGroup * g);
          }
        }
      }
      const int64_t t0 = g0 * kGroup;
      const int64_t t_end = smaller(n_tokens, t0 + int64_t(n_g) * kGroup);
      for (int64_t t = t0; t < t_end; ++t) {
        for (int r = 0; r < n_r; ++r) y[t * y_stride + r0 + r] = acc[r][t - t0];
      }
    }
  }
}

}  // namespace

void pack_tiled_activations_avx2(QType weight, const uint8_t* x_q8k, int64_t act_row,
                                 int64_t n_tokens, int64_t n_cols, uint8_t* packed) {
  const bool biased = type_info(weight).mac == Mac::kBiasedCodes;
  const int64_t n_blocks = n_cols / kBlock;
  const int64_t n_groups = (n_tokens + kGroup - 1) / kGroup;
  const __m256i flip = _mm256_set1_epi8(biased ? int8_t(-128) : 0);
  for (int64_t b = 0; b < n_blocks; ++b) {
    for (int64_t g = 0; g < n_groups; ++g) {
      uint8_t* segment = packed + (b * n_groups + g) * kSegment;
      auto* scales = reinterpret_cast<float*>(segment + kScalesOffset);
      auto* bsums = reinterpret_cast<int16_t*>(segment + kBsumsOffset);
      for (int t = 0; t < kGroup; ++t) {
        const int64_t token = g * kGroup + t;
        uint8_t* codes = segment + kBlock * t;
        if (token >= n_tokens) {
          std::memset(codes, 0, kBlock);
          scales[t] = 0.0f;
          for (int p = 0; p < 8; ++p) bsums[16 * p + 2 * t] = bsums[16 * p + 2 * t + 1] = 0;
          continue;
        }
        BlockQ8_K x;
        std::memcpy(&x, x_q8k + token * act_row + b * int64_t(sizeof(BlockQ8_K)), sizeof(x));
        for (int c = 0; c < kBlock; c += 32) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + c),
                              _mm256_xor_si256(loadu256(x.qs + c), flip));
        }
        scales[t] = x.d;
        for (int p = 0; p < 8; ++p) {
          bsums[16 * p + 2 * t] = x.bsums[2 * p];
          bsums[16 * p + 2 * t + 1] = x.bsums[2 * p + 1];
        }
      }
    }
  }
}

void tiled_kquant_rows_avx2(QType weight, const uint8_t* weights, int64_t w_row, int64_t row_lo,
                            int64_t row_hi, const uint8_t* packed, int64_t n_tokens, int64_t n_cols,
                            float* y, int64_t y_stride, TiledAccumulate accumulate) {
  const TypeInfo info = type_info(weight);
  if (info.decode == nullptr) return;
  const auto run = [&](auto kernel) {
    kernel(info.decode, info.block_bytes, weights, w_row, row_lo, row_hi, packed, n_tokens, n_cols,
           y, y_stride);
  };
  const bool fused = accumulate == TiledAccumulate::kFused;
  switch (info.mac) {
    case Mac::kUnsignedWeight:
      return fused ? run(tiled_rows<Mac::kUnsignedWeight, true, true>)
                   : run(tiled_rows<Mac::kUnsignedWeight, true, false>);
    case Mac::kBiasedCodes:
      return fused ? run(tiled_rows<Mac::kBiasedCodes, false, true>)
                   : run(tiled_rows<Mac::kBiasedCodes, false, false>);
    case Mac::kSignTrick:
      return fused ? run(tiled_rows<Mac::kSignTrick, false, true>)
                   : run(tiled_rows<Mac::kSignTrick, false, false>);
  }
}

}  // namespace sluice::cpu
