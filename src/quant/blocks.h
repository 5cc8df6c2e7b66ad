// Block layouts of the quantized GGUF types, byte for byte as stored in files. Scales are raw
// IEEE-half bits (uint16_t; convert with core/half.h). Sizes are pinned by static_assert: a
// wrong size would silently misread every model, so it must fail to compile instead.
#pragma once

#include <cstdint>

namespace sluice {

inline constexpr int kQK4_0 = 32;
inline constexpr int kQK4_1 = 32;
inline constexpr int kQK5_0 = 32;
inline constexpr int kQK5_1 = 32;
inline constexpr int kQK8_0 = 32;
inline constexpr int kQK8_1 = 32;
inline constexpr int kQK4_NL = 32;
inline constexpr int kQK_MXFP4 = 32;
inline constexpr int kQK_NVFP4 = 64;
inline constexpr int kQK_NVFP4_SUB = 16;  // NVFP4: one UE4M3 scale per 16 elements
inline constexpr int kQK1_0 = 128;
inline constexpr int kQK_K = 256;          // super-block of the K and IQ types
inline constexpr int kKScaleSize = 12;     // packed 6-bit scales and mins of Q4_K / Q5_K
inline constexpr int kIQ3SScaleCount = 4;  // IQ3_S: one 4-bit scale pair per 64 weights

struct BlockQ4_0 {
  uint16_t d;              // scale
  uint8_t qs[kQK4_0 / 2];  // nibbles: low = element j, high = element j + 16
};
struct BlockQ4_1 {
  uint16_t d, m;  // scale, minimum
  uint8_t qs[kQK4_1 / 2];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];  // 5th bits, one per element
  uint8_t qs[kQK5_0 / 2];
};
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[kQK5_1 / 2];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK8_0];
};
struct BlockQ8_1 {
  uint16_t d, s;  // scale, d * sum(qs)
  int8_t qs[kQK8_1];
};
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];  // 4-bit scale | 4-bit min per 16 elements
  uint8_t qs[kQK_K / 4];       // 2-bit quants
  uint16_t d, dmin;
};
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];  // high bit of each 3-bit quant
  uint8_t qs[kQK_K / 4];     // low 2 bits
  uint8_t scales[12];        // 16 packed 6-bit scales
  uint16_t d;
};
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[kKScaleSize];  // 8 scales and 8 mins, 6 bits each
  uint8_t qs[kQK_K / 2];
};
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];  // low 4 bits
  uint8_t qh[kQK_K / 4];  // high 2 bits
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
struct BlockQ8_K {  // activations for K/IQ dot products
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];  // sums of each 16 quants
};
struct BlockIQ2_XXS {
  uint16_t d;
  uint16_t qs[kQK_K / 8];
};
struct BlockIQ2_XS {
  uint16_t d;
  uint16_t qs[kQK_K / 8];
  uint8_t scales[kQK_K / 32];
};
struct BlockIQ2_S {
  uint16_t d;
  uint8_t qs[kQK_K / 4];
  uint8_t qh[kQK_K / 32];
  uint8_t scales[kQK_K / 32];
};
struct BlockIQ3_XXS {
  uint16_t d;
  uint8_t qs[3 * kQK_K / 8];
};
struct BlockIQ3_S {
  uint16_t d;
  uint8_t qs[kQK_K / 4];
  uint8_t qh[kQK_K / 32];
  uint8_t signs[kQK_K / 8];
  uint8_t scales[kIQ3SScaleCount];
};
struct BlockIQ1_S {
  uint16_t d;
  uint8_t qs[kQK_K / 8];
  uint16_t qh[kQK_K / 32];
};
struct BlockIQ1_M {  // no stored d: the scale is spread over the top nibbles of scales
  uint8_t qs[kQK_K / 8];
  uint8_t qh[kQK_K / 16];
  uint8_t scales[kQK_K / 32];
};
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK4_NL / 2];
};
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};
struct BlockTQ1_0 {
  uint8_t qs[(kQK_K - 4 * kQK_K / 64) / 5];  // 5 ternary digits per byte
  uint8_t qh[kQK_K / 64];                    // 4 per byte
  uint16_t d;
};
struct BlockTQ2_0 {
  uint8_t qs[kQK_K / 4];
  uint16_t d;
};
struct BlockMXFP4 {
  uint8_t e;                  // shared E8M0 exponent
  uint8_t qs[kQK_MXFP4 / 2];  // E2M1 nibbles
};
struct BlockNVFP4 {
  uint8_t d[kQK_NVFP4 / kQK_NVFP4_SUB];  // unsigned E4M3 scale of each 16-element sub-block
  uint8_t qs[kQK_NVFP4 / 2];  // E2M1 nibbles, 8 bytes per sub-block s: byte s*8 + j holds
                              // element s*16 + j (low nibble) and s*16 + 8 + j (high nibble)
};
struct BlockQ1_0 {
  uint16_t d;              // scale
  uint8_t qs[kQK1_0 / 8];  // sign bits: bit j % 8 of byte j / 8 set means +d, clear -d
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockIQ2_XXS) == 66);
static_assert(sizeof(BlockIQ2_XS) == 74);
static_assert(sizeof(BlockIQ2_S) == 82);
static_assert(sizeof(BlockIQ3_XXS) == 98);
static_assert(sizeof(BlockIQ3_S) == 110);
static_assert(sizeof(BlockIQ1_S) == 50);
static_assert(sizeof(BlockIQ1_M) == 56);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockIQ4_XS) == 136);
static_assert(sizeof(BlockTQ1_0) == 54);
static_assert(sizeof(BlockTQ2_0) == 66);
static_assert(sizeof(BlockMXFP4) == 17);
static_assert(sizeof(BlockNVFP4) == 36);
static_assert(sizeof(BlockQ1_0) == 18);

}  // namespace sluice
