// The one QType table. Sizes agree with the block structs in blocks.h (static_asserts there).
#include "quant/qtype.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "quant/blocks.h"

namespace sluice {
namespace {

constexpr std::array kTraits = {
    QTypeTraits{QType::F32, "F32", 1, 4, true, true},
    QTypeTraits{QType::F16, "F16", 1, 2, true, true},
    QTypeTraits{QType::Q4_0, "Q4_0", kQK4_0, sizeof(BlockQ4_0), true, true},
    QTypeTraits{QType::Q4_1, "Q4_1", kQK4_1, sizeof(BlockQ4_1), true, true},
    QTypeTraits{QType::Q5_0, "Q5_0", kQK5_0, sizeof(BlockQ5_0), true, true},
    QTypeTraits{QType::Q5_1, "Q5_1", kQK5_1, sizeof(BlockQ5_1), true, true},
    QTypeTraits{QType::Q8_0, "Q8_0", kQK8_0, sizeof(BlockQ8_0), true, true},
    // ggml stores Q8_1 as two halves + 32 int8 = 36 bytes (gguf-py 0.19 lists 40, a stale entry).
    QTypeTraits{QType::Q8_1, "Q8_1", kQK8_1, sizeof(BlockQ8_1), true, true},
    QTypeTraits{QType::Q2_K, "Q2_K", kQK_K, sizeof(BlockQ2_K), true, true},
    QTypeTraits{QType::Q3_K, "Q3_K", kQK_K, sizeof(BlockQ3_K), true, true},
    QTypeTraits{QType::Q4_K, "Q4_K", kQK_K, sizeof(BlockQ4_K), true, true},
    QTypeTraits{QType::Q5_K, "Q5_K", kQK_K, sizeof(BlockQ5_K), true, true},
    QTypeTraits{QType::Q6_K, "Q6_K", kQK_K, sizeof(BlockQ6_K), true, true},
    QTypeTraits{QType::Q8_K, "Q8_K", kQK_K, sizeof(BlockQ8_K), true, true},
    QTypeTraits{QType::IQ2_XXS, "IQ2_XXS", kQK_K, sizeof(BlockIQ2_XXS), true, true},
    QTypeTraits{QType::IQ2_XS, "IQ2_XS", kQK_K, sizeof(BlockIQ2_XS), true, true},
    QTypeTraits{QType::IQ3_XXS, "IQ3_XXS", kQK_K, sizeof(BlockIQ3_XXS), true, true},
    QTypeTraits{QType::IQ1_S, "IQ1_S", kQK_K, sizeof(BlockIQ1_S), true, true},
    QTypeTraits{QType::IQ4_NL, "IQ4_NL", kQK4_NL, sizeof(BlockIQ4_NL), true, true},
    QTypeTraits{QType::IQ3_S, "IQ3_S", kQK_K, sizeof(BlockIQ3_S), true, true},
    QTypeTraits{QType::IQ2_S, "IQ2_S", kQK_K, sizeof(BlockIQ2_S), true, true},
    QTypeTraits{QType::IQ4_XS, "IQ4_XS", kQK_K, sizeof(BlockIQ4_XS), true, true},
    QTypeTraits{QType::I8, "I8", 1, 1, false, true},
    QTypeTraits{QType::I16, "I16", 1, 2, false, true},
    QTypeTraits{QType::I32, "I32", 1, 4, false, true},
    QTypeTraits{QType::I64, "I64", 1, 8, false, true},
    QTypeTraits{QType::F64, "F64", 1, 8, true, true},
    QTypeTraits{QType::IQ1_M, "IQ1_M", kQK_K, sizeof(BlockIQ1_M), true, true},
    QTypeTraits{QType::BF16, "BF16", 1, 2, true, true},
    QTypeTraits{QType::TQ1_0, "TQ1_0", kQK_K, sizeof(BlockTQ1_0), true, true},
    QTypeTraits{QType::TQ2_0, "TQ2_0", kQK_K, sizeof(BlockTQ2_0), true, true},
    QTypeTraits{QType::MXFP4, "MXFP4", kQK_MXFP4, sizeof(BlockMXFP4), true, true},
    QTypeTraits{QType::NVFP4, "NVFP4", kQK_NVFP4, sizeof(BlockNVFP4), true, true},
    QTypeTraits{QType::Q1_0, "Q1_0", kQK1_0, sizeof(BlockQ1_0), true, true},
    QTypeTraits{QType::F8_E4M3, "F8_E4M3", 1, 1, true, false},
    QTypeTraits{QType::F8_E5M2, "F8_E5M2", 1, 1, true, false},
    QTypeTraits{QType::U8, "U8", 1, 1, false, false},
    QTypeTraits{QType::BOOL, "BOOL", 1, 1, false, false},
};

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::toupper(static_cast<unsigned char>(x)) ==
                  std::toupper(static_cast<unsigned char>(y));
         });
}

}  // namespace

std::optional<QTypeTraits> qtype_traits(uint32_t type_id) {
  for (const auto& traits : kTraits) {
    if (static_cast<uint32_t>(traits.type) == type_id) return traits;
  }
  return std::nullopt;
}

const QTypeTraits& traits_of(QType type) {
  for (const auto& traits : kTraits) {
    if (traits.type == type) return traits;
  }
  return kTraits[0];  // unreachable for a valid enum value
}

std::optional<QType> qtype_from_name(std::string_view name) {
  for (const auto& traits : kTraits) {
    if (iequals(traits.name, name)) return traits.type;
  }
  return std::nullopt;
}

const QTypeTraits* all_qtypes_begin() {
  return kTraits.data();
}
const QTypeTraits* all_qtypes_end() {
  return kTraits.data() + kTraits.size();
}

std::optional<uint64_t> row_bytes(QType type, uint64_t n_elements) {
  const auto& traits = traits_of(type);
  if (n_elements % traits.block_size != 0) return std::nullopt;
  return n_elements / traits.block_size * traits.block_bytes;
}

}  // namespace sluice
