// Builds the random rows of quant_test_data.h. Scale fields are overwritten per block type;
// all other bytes stay random, which is valid for every format (grid indices and sign
// indices cover their tables exactly).
#include "quant_test_data.h"

#include <cmath>
#include <cstring>

#include "core/half.h"
#include "quant/blocks.h"
#include "quant/dequantize.h"
#include "quant/dot_reference.h"
#include "quant/quantize.h"

namespace sluice::test {
namespace {

uint16_t random_scale(std::mt19937& rng) {
  std::uniform_real_distribution<float> magnitude(0.002f, 0.02f);
  const float value = (rng() & 1) ? magnitude(rng) : -magnitude(rng);
  return fp32_to_fp16(value);
}

template <class Block, class Fix>
void fix_blocks(uint8_t* bytes, int64_t n_blocks, Fix fix) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    Block block;
    std::memcpy(&block, bytes + i * sizeof(Block), sizeof(Block));
    fix(block);
    std::memcpy(bytes + i * sizeof(Block), &block, sizeof(Block));
  }
}

void fix_scales(QType type, uint8_t* bytes, int64_t n_blocks, std::mt19937& rng) {
  auto d_only = [&](auto& b) { b.d = random_scale(rng); };
  auto d_and_m = [&](auto& b) {
    b.d = random_scale(rng);
    b.m = random_scale(rng);
  };
  auto d_and_dmin = [&](auto& b) {
    b.d = random_scale(rng);
    b.dmin = random_scale(rng);
  };
  switch (type) {
    case QType::Q4_0:
      fix_blocks<BlockQ4_0>(bytes, n_blocks, d_only);
      break;
    case QType::Q5_0:
      fix_blocks<BlockQ5_0>(bytes, n_blocks, d_only);
      break;
    case QType::Q8_0:
      fix_blocks<BlockQ8_0>(bytes, n_blocks, d_only);
      break;
    case QType::IQ4_NL:
      fix_blocks<BlockIQ4_NL>(bytes, n_blocks, d_only);
      break;
    case QType::Q4_1:
      fix_blocks<BlockQ4_1>(bytes, n_blocks, d_and_m);
      break;
    case QType::Q5_1:
      fix_blocks<BlockQ5_1>(bytes, n_blocks, d_and_m);
      break;
    case QType::MXFP4:
      fix_blocks<BlockMXFP4>(bytes, n_blocks, [&](auto& b) { b.e = uint8_t(118 + rng() % 12); });
      break;
    case QType::Q2_K:
      fix_blocks<BlockQ2_K>(bytes, n_blocks, d_and_dmin);
      break;
    case QType::Q3_K:
      fix_blocks<BlockQ3_K>(bytes, n_blocks, d_only);
      break;
    case QType::Q4_K:
      fix_blocks<BlockQ4_K>(bytes, n_blocks, d_and_dmin);
      break;
    case QType::Q5_K:
      fix_blocks<BlockQ5_K>(bytes, n_blocks, d_and_dmin);
      break;
    case QType::Q6_K:
      fix_blocks<BlockQ6_K>(bytes, n_blocks, d_only);
      break;
    case QType::IQ2_XXS:
      fix_blocks<BlockIQ2_XXS>(bytes, n_blocks, d_only);
      break;
    case QType::IQ2_XS:
      fix_blocks<BlockIQ2_XS>(bytes, n_blocks, d_only);
      break;
    case QType::IQ2_S:
      fix_blocks<BlockIQ2_S>(bytes, n_blocks, d_only);
      break;
    case QType::IQ3_XXS:
      fix_blocks<BlockIQ3_XXS>(bytes, n_blocks, d_only);
      break;
    case QType::IQ3_S:
      fix_blocks<BlockIQ3_S>(bytes, n_blocks, d_only);
      break;
    case QType::IQ1_S:
      fix_blocks<BlockIQ1_S>(bytes, n_blocks, d_only);
      break;
    case QType::IQ4_XS:
      fix_blocks<BlockIQ4_XS>(bytes, n_blocks, d_only);
      break;
    case QType::IQ1_M:
      // The half scale is the top nibbles of the four uint16 scale words, low nibble first.
      fix_blocks<BlockIQ1_M>(bytes, n_blocks, [&](BlockIQ1_M& b) {
        const uint16_t d = random_scale(rng);
        uint16_t words[4];
        std::memcpy(words, b.scales, sizeof(words));
        for (int k = 0; k < 4; ++k) {
          words[k] = uint16_t((words[k] & 0x0fff) | (((d >> (4 * k)) & 0xf) << 12));
        }
        std::memcpy(b.scales, words, sizeof(words));
      });
      break;
    default:
      break;
  }
}

std::vector<float> random_floats(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> out(static_cast<size_t>(n));  // [n]
  for (float& v : out) v = value(rng);
  return out;
}

}  // namespace

std::vector<uint8_t> random_weight_rows(QType type, int64_t n_rows, int64_t n_cols,
                                        std::mt19937& rng) {
  const uint64_t row_size = *row_bytes(type, uint64_t(n_cols));
  std::vector<uint8_t> bytes(size_t(n_rows) * row_size);  // [n_rows, row_size]
  if (type == QType::F32 || type == QType::F16 || type == QType::BF16) {
    for (int64_t r = 0; r < n_rows; ++r) {
      const std::vector<float> values = random_floats(n_cols, rng);
      quantize_row(type, values.data(), bytes.data() + r * row_size, n_cols);
    }
    return bytes;
  }
  for (auto& byte : bytes) byte = uint8_t(rng());
  const int64_t blocks_per_row = n_cols / traits_of(type).block_size;
  fix_scales(type, bytes.data(), n_rows * blocks_per_row, rng);
  return bytes;
}

std::vector<uint8_t> random_activation_row(QType type, int64_t n_cols, std::mt19937& rng) {
  std::vector<uint8_t> bytes(*row_bytes(type, uint64_t(n_cols)));
  const std::vector<float> values = random_floats(n_cols, rng);
  quantize_row(type, values.data(), bytes.data(), n_cols);
  return bytes;
}

ExactDot exact_dot(QType weight_type, const void* w, QType activation_type, const void* x,
                   int64_t n_cols) {
  std::vector<float> wf(static_cast<size_t>(n_cols)),
      xf(static_cast<size_t>(n_cols));  // [n_cols] each
  dequantize_row(weight_type, w, wf.data(), n_cols);
  dequantize_row(activation_type, x, xf.data(), n_cols);
  ExactDot out{0.0, 0.0};
  for (int64_t i = 0; i < n_cols; ++i) {
    const double product = double(wf[size_t(i)]) * double(xf[size_t(i)]);
    out.value += product;
    out.magnitude += std::fabs(product);
  }
  return out;
}

std::vector<QType> dot_weight_types() {
  std::vector<QType> types;
  for (const QTypeTraits* t = all_qtypes_begin(); t != all_qtypes_end(); ++t) {
    if (activation_type_for(t->type)) types.push_back(t->type);
  }
  return types;
}

}  // namespace sluice::test
