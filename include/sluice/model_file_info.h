// Inspecting and dumping model files through the public API: plain structs describing a GGUF or
// safetensors file (metadata and tensor table) and a float32 dump of one tensor. The CLI uses
// this alone; nothing here exposes tensors, backends or the format readers' types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sluice {

struct TensorSummary {
  std::string name;
  std::string type;             // "F32", "Q4_K", "BF16", ...
  std::vector<uint64_t> shape;  // first dimension fastest, as GGUF stores it
  uint64_t offset = 0;          // absolute byte offset in its file
  uint64_t bytes = 0;
  uint32_t file_index = 0;  // which file of a sharded set (ModelFileSummary::files)
};

struct MetadataSummary {
  std::string key;
  std::string type;          // "u32", "string", "array", ...
  std::string element_type;  // arrays: type of the elements; empty otherwise
  uint64_t length = 0;       // arrays: number of elements; 0 otherwise
  std::string value_json;    // JSON of the scalar, or of the first elements of an array
};

struct ModelFileSummary {
  std::string path;
  std::string format;  // "gguf" or "safetensors"
  uint32_t version = 0;
  uint64_t file_size = 0;  // sum over all files of a sharded set
  uint64_t alignment = 0;
  uint64_t data_offset = 0;
  std::vector<std::string> files;
  std::vector<MetadataSummary> metadata;
  std::vector<TensorSummary> tensors;
};

// Reads and validates the file's header (never tensor data). Arrays show at most
// `array_preview` elements in value_json. Throws sluice::Error on a bad or missing file.
ModelFileSummary inspect_model_file(const std::string& path, size_t array_preview = 8);

// Writes `tensor` as little-endian float32 in storage order (first dimension fastest) to
// `out_path` (atomically: temporary file, then rename) or to stdout when it is empty. Streams
// in chunks; an unknown tensor is a sluice::Error naming it.
void dump_tensor_f32(const std::string& path, const std::string& tensor,
                     const std::string& out_path_or_empty_for_stdout);

}  // namespace sluice
