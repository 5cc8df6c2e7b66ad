// GGUF reader: validates a GGUF v2/v3 header completely — counts, lengths, UTF-8 names, value
// and tensor types, shapes, sizes, alignment, ranges — before anything trusts it, and returns
// the catalogue. Tensor payloads are never read. Knows no architecture.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "format/model_file.h"

namespace sluice {

// Opens and maps `path`; the ModelFile keeps the file open for tensor_bytes().
ModelFile read_gguf(const std::string& path);

// The same validation over bytes in memory (fuzzers, tests); `display_name` names the input in
// errors. The result has one source without a File: tensor_bytes() refuses.
ModelFile parse_gguf(std::span<const uint8_t> bytes, const std::string& display_name);

}  // namespace sluice
