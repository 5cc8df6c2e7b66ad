// Format detection: directory or safetensors-looking name → safetensors; otherwise the GGUF
// reader, whose magic check words the error for a file that is neither.
#include "format/model_file_open.h"

#include <filesystem>

#include "format/gguf/gguf_reader.h"
#include "format/safetensors/safetensors_reader.h"

namespace sluice {

ModelFile read_model_file(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error) || path.ends_with(".safetensors") ||
      path.ends_with(".index.json")) {
    return read_safetensors(path);
  }
  return read_gguf(path);
}

}  // namespace sluice
