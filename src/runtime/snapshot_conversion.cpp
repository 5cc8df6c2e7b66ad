// Converting a snapshot that cannot be read in place to a temporary GGUF at load.
#include "runtime/snapshot_conversion.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "format/hf/hf_config.h"
#include "format/model_file_open.h"
#include "sluice/convert.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;

// The snapshot folder of `path` when it is a Hugging Face snapshot whose family must be
// converted to run; empty otherwise.
std::string snapshot_needing_conversion(const std::string& path) {
  std::error_code error;
  const fs::path dir =
      fs::is_directory(path, error) ? fs::path(path) : fs::path(path).parent_path();
  if (!path.ends_with(".safetensors") && !path.ends_with(".index.json") &&
      !fs::is_directory(path, error)) {
    return {};
  }
  if (!fs::is_regular_file(dir / "config.json", error)) return {};
  const HfConfig config = HfConfig::load(dir.string());
  const bool gpt_oss = config.contains("model_type") && config.json().at("model_type") == "gpt_oss";
  return gpt_oss ? dir.string() : std::string();
}

// The float type of the snapshot's first matrix: what the converted copy keeps.
std::string source_float_type(const ModelFile& snapshot) {
  for (const TensorInfo& tensor : snapshot.tensors()) {
    if (tensor.n_dims < 2) continue;
    if (tensor.type == QType::BF16) return "BF16";
    if (tensor.type == QType::F16) return "F16";
    if (tensor.type == QType::F32) return "F32";
  }
  return "BF16";
}

}  // namespace

SnapshotConversion::SnapshotConversion(const std::string& path) : path_(path) {
  const std::string dir = snapshot_needing_conversion(path);
  if (dir.empty()) return;
  const ModelFile snapshot = read_model_file(dir);
  uint64_t bytes = 0;
  for (const TensorInfo& tensor : snapshot.tensors()) bytes += tensor.n_bytes;
  std::error_code error;
  const fs::path folder = fs::temp_directory_path(error);
  const fs::space_info space = fs::space(folder, error);
  if (error || space.available < bytes + (uint64_t(1) << 30)) {
    fail(path, ": this snapshot is converted to a temporary GGUF to run (about ", bytes >> 20,
         " MiB) and ", folder.string(), " lacks the room; convert it once: sluice convert ", dir,
         " -o MODEL.gguf");
  }
  temporary_ = (folder / ("sluice-snapshot-" + std::to_string(::getpid()) + "-" +
                          fs::path(dir).filename().string() + ".gguf"))
                   .string();
  std::fprintf(stderr,
               "%s: converting to a temporary GGUF to run it (its experts cannot be read in "
               "place); `sluice convert %s -o MODEL.gguf` once saves this step\n",
               path.c_str(), dir.c_str());
  ConvertOptions options;
  options.type = source_float_type(snapshot);
  convert_hf_snapshot(dir, temporary_, options);
  path_ = temporary_;
}

SnapshotConversion::~SnapshotConversion() {
  if (temporary_.empty()) return;
  std::error_code error;
  fs::remove(temporary_, error);
}

}  // namespace sluice
