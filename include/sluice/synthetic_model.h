// Synthetic model files through the public API: a GGUF with a real family's geometry (names,
// keys, shapes), a valid byte-level BPE vocabulary and random weights, written at disk speed for
// tests and benchmarks. The weights mean nothing; only the layout and the magnitudes are real.
// Nothing here exposes the writer, the block layouts or the random generator.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace sluice {

struct SyntheticModelOptions {
  std::string geometry;     // a name from synthetic_geometry_names(), e.g. "qwen3-30b-a3b"
  std::string type;         // matrices outside the experts ("Q4_K"); empty: the geometry's
  std::string expert_type;  // routed-expert tensors; empty: the geometry's (or `type` if set)
  uint64_t seed = 0;        // the same seed and options give a byte-identical file
  uint32_t layers = 0;      // 0: the geometry's layer count
};

struct SyntheticModelSummary {
  std::string path;
  std::string architecture;  // general.architecture, e.g. "qwen3moe"
  std::string type;
  std::string expert_type;
  uint32_t layers = 0;
  uint64_t tensors = 0;
  uint64_t tensor_bytes = 0;  // sum of the tensors' data
  uint64_t file_bytes = 0;    // the file as written
};

// Called after each piece of tensor data is written: bytes of tensor data so far, and in all.
using SyntheticProgress = std::function<void(uint64_t done, uint64_t total)>;

// The geometries write_synthetic_model knows, in a stable order.
std::vector<std::string> synthetic_geometry_names();

// Writes the model to `path` atomically (temporary name, then rename). Throws sluice::Error
// naming the geometry, type or tensor that cannot be made (unknown name, a type that is not
// supported, a row length that is not a multiple of the type's block size).
SyntheticModelSummary write_synthetic_model(const std::string& path,
                                            const SyntheticModelOptions& options,
                                            const SyntheticProgress& progress = {});

}  // namespace sluice
