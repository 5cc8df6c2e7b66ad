// Safetensors reader: one .safetensors file, or a Hugging Face snapshot directory (a single
// model.safetensors or shards listed by model.safetensors.index.json), validated — header
// bounds, JSON shape, dtypes, offsets that tile the data exactly, sizes — into a ModelFile.
// Row-major shapes are reversed so ne[0] is the fastest dimension, as in GGUF.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "format/model_file.h"

namespace sluice {

// Largest JSON header accepted (the reference implementation's limit).
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = uint64_t{100} << 20;

ModelFile read_safetensors(const std::string& file_or_dir);

// One file's bytes in memory (fuzzers, tests); the result has one source without a File.
ModelFile parse_safetensors(std::span<const uint8_t> bytes, const std::string& display_name);

}  // namespace sluice
