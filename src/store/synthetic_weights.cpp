// Random blocks per type. Each quantized type's quants are uniform random bits; its scales are
// set from the root mean square of those quants (worked out below for each layout) so that the
// dequantized values have the spread asked for. Scales vary from block to block, or sub-block to
// sub-block, as in real files, and are always finite.
#include "store/synthetic_weights.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "core/fnv1a.h"
#include "core/half.h"
#include "quant/blocks.h"
#include "quant/dequantize.h"

namespace sluice {
namespace {

// Root mean squares of uniformly random quants, so scale = rms / these.
// Q4_0: q - 8 for q in 0..15: sum of k^2 over k in -8..7 is 344, over 16 values.
const float kRmsQ4_0 = std::sqrt(344.0f / 16);
// Q8_0: bytes in -127..127 (-128 is moved to -127): (2 * 690880 + 127^2) / 256.
const float kRmsQ8_0 = std::sqrt((2 * 690880.0f + 127 * 127) / 256);
// Q4_K: q - 7.5 for q in 0..15 (the min re-centres each sub-block): 340 / 16.
const float kRmsQ4K = std::sqrt(340.0f / 16);
// Q4_K sub-block scales uniform in 16..31: (sum of k^2 over 16..31) / 16.
constexpr uint32_t kQ4KScaleBase = 16;
const float kRmsQ4KScale = std::sqrt(9176.0f / 16);
// Q6_K: q - 32 for q in 0..63: (2 * 10416 + 32^2) / 64.
const float kRmsQ6K = std::sqrt((2 * 10416.0f + 1024) / 64);
// Q6_K sub-block scales uniform in 4..11: (sum of k^2 over 4..11) / 8.
constexpr int kQ6KScaleBase = 4;
const float kRmsQ6KScale = std::sqrt(492.0f / 8);
// MXFP4: the doubled E2M1 magnitudes 0 1 2 3 4 6 8 12, signs even: 274 / 8.
const float kRmsMxfp4 = std::sqrt(274.0f / 8);

uint64_t splitmix64(uint64_t& state);

// The root mean square of `n_blocks` blocks of `type` filled by `fill` with unit scales, through
// the quant/ reference dequantizer: for layouts whose values come from lookup grids (IQ2_XXS)
// or whose scales and mins interact (Q2_K), measuring beats a closed form.
template <class Block, class Fill>
float measured_unit_rms(QType type, Fill fill) {
  constexpr int kBlocks = 256;
  std::vector<Block> blocks(kBlocks);
  fill(blocks.data(), kBlocks);
  std::vector<float> values(size_t(kBlocks) * kQK_K);
  dequantize_row(type, blocks.data(), values.data(), int64_t(values.size()));
  double sum = 0;
  for (float v : values) sum += double(v) * v;
  return float(std::sqrt(sum / double(values.size())));
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// xoshiro256**: a few cycles per 64 random bits, so filling is never the bottleneck.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& word : s_) word = splitmix64(seed);
  }

  uint64_t next() {
    const uint64_t result = std::rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = std::rotl(s_[3], 45);
    return result;
  }

  // Uniform in [-1, 1).
  float symmetric() { return float(int32_t(uint32_t(next() >> 32))) * 0x1p-31f; }

  // `n` random bytes; n is a multiple of 8 for every field filled here.
  void bytes(void* dst, size_t n) {
    auto* out = static_cast<uint8_t*>(dst);
    for (size_t i = 0; i < n; i += 8) {
      const uint64_t word = next();
      std::memcpy(out + i, &word, 8);
    }
  }

 private:
  uint64_t s_[4];
};

// A block's scale within ±25% of the nominal one, as an f16.
uint16_t jittered_half(float scale, Rng& rng) {
  return fp32_to_fp16(scale * (1.0f + 0.25f * rng.symmetric()));
}

template <class Store>
void fill_plain(const WeightSpread& spread, Rng& rng, uint64_t n, Store store) {
  if (spread.kind == WeightSpread::Kind::negative) {
    const float mid = 0.5f * (spread.scale + spread.high),
                half = 0.5f * (spread.high - spread.scale);
    for (uint64_t i = 0; i < n; ++i) store(i, -(mid + half * rng.symmetric()));
    return;
  }
  if (spread.kind == WeightSpread::Kind::norm) {
    for (uint64_t i = 0; i < n; ++i) store(i, 1.0f + spread.scale * rng.symmetric());
    return;
  }
  const float half_width = spread.scale * std::sqrt(3.0f);  // uniform with that rms
  for (uint64_t i = 0; i < n; ++i) store(i, half_width * rng.symmetric());
}

void fill_q4_0(float rms, Rng& rng, BlockQ4_0* blocks, uint64_t n_blocks) {
  const float d = rms / kRmsQ4_0;
  for (uint64_t b = 0; b < n_blocks; ++b) {
    // q - 8 leans negative by half a step; a random sign on d (ggml writes negative d too)
    // cancels that over a row.
    blocks[b].d = uint16_t(jittered_half(d, rng) | ((rng.next() & 1) << 15));
    rng.bytes(blocks[b].qs, sizeof(blocks[b].qs));
  }
}

void fill_q8_0(float rms, Rng& rng, BlockQ8_0* blocks, uint64_t n_blocks) {
  const float d = rms / kRmsQ8_0;
  for (uint64_t b = 0; b < n_blocks; ++b) {
    blocks[b].d = jittered_half(d, rng);
    rng.bytes(blocks[b].qs, sizeof(blocks[b].qs));
    // ggml's quantizer never writes -128; kernels may rely on |q| <= 127.
    for (int8_t& q : blocks[b].qs) q = q == -128 ? int8_t(-127) : q;
  }
}

// ggml's 12-byte packing of eight 6-bit scales and mins (the inverse of get_scale_min_k4).
void pack_q4_k_scales(const uint8_t sc[8], const uint8_t m[8], uint8_t out[kKScaleSize]) {
  for (int j = 0; j < 4; ++j) {
    out[j] = uint8_t((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    out[j + 4] = uint8_t((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    out[j + 8] = uint8_t((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}

void fill_q4_k(float rms, Rng& rng, BlockQ4_K* blocks, uint64_t n_blocks) {
  // value = d*sc*q - dmin*m; with m = sc and dmin = 7.5 d every sub-block is centred on zero.
  const uint16_t d = fp32_to_fp16(rms / (kRmsQ4KScale * kRmsQ4K));
  const uint16_t dmin = fp32_to_fp16(7.5f * fp16_to_fp32(d));
  for (uint64_t b = 0; b < n_blocks; ++b) {
    blocks[b].d = d;
    blocks[b].dmin = dmin;
    const uint64_t bits = rng.next();
    uint8_t scales[8];
    for (int j = 0; j < 8; ++j) scales[j] = uint8_t(kQ4KScaleBase + ((bits >> (4 * j)) & 15));
    pack_q4_k_scales(scales, scales, blocks[b].scales);
    rng.bytes(blocks[b].qs, sizeof(blocks[b].qs));
  }
}

void fill_q6_k(float rms, Rng& rng, BlockQ6_K* blocks, uint64_t n_blocks) {
  const uint16_t d = fp32_to_fp16(rms / (kRmsQ6KScale * kRmsQ6K));
  for (uint64_t b = 0; b < n_blocks; ++b) {
    rng.bytes(blocks[b].ql, sizeof(blocks[b].ql));
    rng.bytes(blocks[b].qh, sizeof(blocks[b].qh));
    // Scales of random sign (as ggml's can be) cancel the half-step lean of q - 32.
    const uint64_t bits = rng.next();
    for (int j = 0; j < kQK_K / 16; ++j) {
      const int scale = kQ6KScaleBase + int((bits >> (4 * j)) & 7);
      blocks[b].scales[j] = int8_t((bits >> (4 * j + 3)) & 1 ? -scale : scale);
    }
    blocks[b].d = d;
  }
}

void fill_mxfp4(float rms, Rng& rng, BlockMXFP4* blocks, uint64_t n_blocks) {
  // e8m0_to_fp32_half(e) is 2^(e - 128) for e >= 2: the nearest power of two to the scale.
  const long exponent = 128 + std::lround(std::log2(rms / kRmsMxfp4));
  const auto e = uint8_t(std::clamp<long>(exponent, 2, 254));
  for (uint64_t b = 0; b < n_blocks; ++b) {
    blocks[b].e = e;
    rng.bytes(blocks[b].qs, sizeof(blocks[b].qs));
  }
}

// Q2_K: value = d*sc*q - dmin*m for q in 0..3; with m = sc and dmin = 1.5 d every sub-block is
// centred on zero. Sub-block scales uniform in 8..15.
void fill_q2_k_raw(uint16_t d, Rng& rng, BlockQ2_K* blocks, uint64_t n_blocks, bool jitter) {
  for (uint64_t b = 0; b < n_blocks; ++b) {
    const uint16_t db = jitter ? jittered_half(fp16_to_fp32(d), rng) : d;
    blocks[b].d = db;
    blocks[b].dmin = fp32_to_fp16(1.5f * fp16_to_fp32(db));
    const uint64_t bits = rng.next();
    for (int j = 0; j < kQK_K / 16; ++j) {
      const auto sc = uint8_t(8 + ((bits >> (3 * j)) & 7));
      blocks[b].scales[j] = uint8_t(sc | (sc << 4));
    }
    rng.bytes(blocks[b].qs, sizeof(blocks[b].qs));
  }
}

void fill_q2_k(float rms, Rng& rng, BlockQ2_K* blocks, uint64_t n_blocks) {
  static const float unit = measured_unit_rms<BlockQ2_K>(QType::Q2_K, [](BlockQ2_K* b, int n) {
    Rng calibration(1);
    fill_q2_k_raw(fp32_to_fp16(1.0f), calibration, b, uint64_t(n), false);
  });
  fill_q2_k_raw(fp32_to_fp16(rms / unit), rng, blocks, n_blocks, true);
}

// IQ2_XXS: every byte of qs is a legal grid index, sign pattern or 4-bit sub-scale, so random
// bytes are valid blocks; the f16 scale sets the spread.
void fill_iq2_xxs_raw(uint16_t d, Rng& rng, BlockIQ2_XXS* blocks, uint64_t n_blocks, bool jitter) {
  for (uint64_t b = 0; b < n_blocks; ++b) {
    blocks[b].d = jitter ? jittered_half(fp16_to_fp32(d), rng) : d;
    rng.bytes(blocks[b].qs, sizeof(blocks[b].qs));
  }
}

void fill_iq2_xxs(float rms, Rng& rng, BlockIQ2_XXS* blocks, uint64_t n_blocks) {
  static const float unit =
      measured_unit_rms<BlockIQ2_XXS>(QType::IQ2_XXS, [](BlockIQ2_XXS* b, int n) {
        Rng calibration(1);
        fill_iq2_xxs_raw(fp32_to_fp16(1.0f), calibration, b, uint64_t(n), false);
      });
  fill_iq2_xxs_raw(fp32_to_fp16(rms / unit), rng, blocks, n_blocks, true);
}

constexpr QType kSupported[] = {QType::F32,  QType::F16,    QType::BF16, QType::Q8_0,
                                QType::Q4_0, QType::Q4_K,   QType::Q6_K, QType::MXFP4,
                                QType::Q2_K, QType::IQ2_XXS};

}  // namespace

std::string synthetic_type_names() {
  std::string names;
  for (QType type : kSupported)
    names += (names.empty() ? "" : ", ") + std::string(qtype_name(type));
  return names;
}

bool synthetic_type_supported(QType type) {
  return std::find(std::begin(kSupported), std::end(kSupported), type) != std::end(kSupported);
}

void fill_random_weights(QType type, const WeightSpread& spread, uint64_t seed, void* dst,
                         uint64_t n_elements) {
  const auto& traits = traits_of(type);
  if (!synthetic_type_supported(type)) {
    fail("synth: type ", traits.name, " is not supported (supported: ", synthetic_type_names(),
         ")");
  }
  if (n_elements % traits.block_size != 0) {
    fail("synth: ", n_elements, " values are not whole blocks of ", traits.name);
  }
  if (spread.kind != WeightSpread::Kind::matrix && type != QType::F32) {
    fail("synth: norm, decay and id tables must be F32 (ids I32), not ", traits.name);
  }
  Rng rng(seed);
  const uint64_t n_blocks = n_elements / traits.block_size;
  const float rms = spread.scale;
  switch (type) {
    case QType::F32:
      fill_plain(spread, rng, n_elements,
                 [out = static_cast<float*>(dst)](uint64_t i, float v) { out[i] = v; });
      break;
    case QType::F16:
      fill_plain(spread, rng, n_elements, [out = static_cast<uint16_t*>(dst)](uint64_t i, float v) {
        out[i] = fp32_to_fp16(v);
      });
      break;
    case QType::BF16:
      fill_plain(spread, rng, n_elements, [out = static_cast<uint16_t*>(dst)](uint64_t i, float v) {
        out[i] = fp32_to_bf16(v);
      });
      break;
    case QType::Q4_0:
      fill_q4_0(rms, rng, static_cast<BlockQ4_0*>(dst), n_blocks);
      break;
    case QType::Q8_0:
      fill_q8_0(rms, rng, static_cast<BlockQ8_0*>(dst), n_blocks);
      break;
    case QType::Q4_K:
      fill_q4_k(rms, rng, static_cast<BlockQ4_K*>(dst), n_blocks);
      break;
    case QType::Q6_K:
      fill_q6_k(rms, rng, static_cast<BlockQ6_K*>(dst), n_blocks);
      break;
    case QType::MXFP4:
      fill_mxfp4(rms, rng, static_cast<BlockMXFP4*>(dst), n_blocks);
      break;
    case QType::Q2_K:
      fill_q2_k(rms, rng, static_cast<BlockQ2_K*>(dst), n_blocks);
      break;
    case QType::IQ2_XXS:
      fill_iq2_xxs(rms, rng, static_cast<BlockIQ2_XXS*>(dst), n_blocks);
      break;
    default:
      break;  // refused above
  }
}

void fill_expert_ids(uint64_t seed, uint32_t n_expert, uint32_t row, uint64_t first, int32_t* dst,
                     uint64_t count) {
  if (n_expert == 0 || row == 0 || row > n_expert) {
    fail("synth: cannot draw ", row, " distinct experts of ", n_expert);
  }
  // Row r is a random start and a random step coprime with n_expert, so its ids are distinct.
  auto step_coprime = [n_expert](uint64_t r) {
    uint32_t step = uint32_t(r % n_expert);
    for (uint32_t k = 0; k < n_expert; ++k, step = (step + 1) % n_expert) {
      if (step != 0 && std::gcd(step, n_expert) == 1) return step;
    }
    return 1u;
  };
  uint64_t current_row = UINT64_MAX, start = 0, step = 1;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t element = first + i, r = element / row, j = element % row;
    if (r != current_row) {
      uint64_t state = seed ^ (r * 0x9e3779b97f4a7c15ull);
      start = splitmix64(state) % n_expert;
      step = step_coprime(splitmix64(state));
      current_row = r;
    }
    dst[i] = int32_t((start + j * step) % n_expert);
  }
}

uint64_t piece_seed(uint64_t seed, const std::string& tensor_name, uint64_t piece) {
  const uint64_t name_hash =
      fnv1a64({reinterpret_cast<const uint8_t*>(tensor_name.data()), tensor_name.size()});
  uint64_t state = seed;
  state = splitmix64(state) ^ name_hash;
  state = splitmix64(state) ^ piece;
  return splitmix64(state);
}

}  // namespace sluice
