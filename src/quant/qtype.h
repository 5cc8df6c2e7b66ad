// QType: the tensor element types of GGML/GGUF, numbered exactly as the file format numbers
// them, and their traits (block size in elements, bytes per block). One table; adding a type is
// one entry here plus its block layout, reference kernels and parity test.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace sluice {

enum class QType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41,
  // Element types of safetensors checkpoints that GGUF does not define. Their ids lie outside
  // GGUF's range, so a GGUF file can never name them (qtype_traits(id) marks them !in_gguf).
  F8_E4M3 = 1000,
  F8_E5M2 = 1001,
  U8 = 1002,
  BOOL = 1003,
};

struct QTypeTraits {
  QType type;
  std::string_view name;  // as llama.cpp and gguf-py print it: "Q4_K", "BF16"
  uint32_t block_size;    // elements per block (1 for plain types)
  uint32_t block_bytes;   // bytes per block
  bool is_float;          // a floating or quantized format (false for I8..I64, U8, BOOL)
  bool in_gguf;           // a type id GGUF files may use
};

// Traits of a known type id (GGUF's or ours); nullopt for ids nobody defines. Callers reading a
// GGUF file must also check in_gguf.
std::optional<QTypeTraits> qtype_traits(uint32_t type_id);
const QTypeTraits& traits_of(QType type);
std::optional<QType> qtype_from_name(std::string_view name);  // case-insensitive
inline std::string_view qtype_name(QType type) {
  return traits_of(type).name;
}

// Every defined type, in id order (for tests and tables).
const QTypeTraits* all_qtypes_begin();
const QTypeTraits* all_qtypes_end();

// Bytes of a row of `n_elements`; nullopt when n_elements is not a multiple of the block size.
std::optional<uint64_t> row_bytes(QType type, uint64_t n_elements);

}  // namespace sluice
