// ModelFile: the neutral catalogue of one model file (or one sharded set) — typed metadata in
// file order and TensorInfos that say where each tensor's bytes are. Built only by the format
// readers after validation; opening never reads tensor payloads. Knows no architecture.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "format/meta_value.h"
#include "io/file.h"
#include "quant/qtype.h"

namespace sluice {

inline constexpr uint32_t kMaxDims = 4;

struct TensorInfo {
  std::string name;
  QType type = QType::F32;
  uint32_t n_dims = 0;
  std::array<uint64_t, kMaxDims> ne = {1, 1, 1, 1};  // first dimension fastest; unused dims 1
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  uint32_t file_index = 0;  // into ModelFile::sources()
  uint64_t offset = 0;      // absolute byte offset in that file

  std::span<const uint64_t> shape() const { return {ne.data(), n_dims}; }
  uint64_t n_rows() const { return ne[0] == 0 ? 0 : n_elements / ne[0]; }
};

enum class FileFormat { gguf, safetensors };

struct MetaEntry {
  std::string key;
  MetaValue value;
};

// One backing file: its path, size, and (when read from disk) the open File. Parsers given
// bytes in memory leave `file` empty.
struct SourceFile {
  std::string path;
  uint64_t size = 0;
  std::shared_ptr<File> file;
};

class ModelFile {
 public:
  ModelFile(FileFormat format, std::string display_name);

  FileFormat format() const { return format_; }
  const std::string& display_name() const { return display_name_; }
  std::string_view format_name() const;  // "gguf" or "safetensors"; prefixes error messages

  uint32_t version = 0;      // GGUF version; 0 for safetensors
  uint64_t alignment = 1;    // GGUF data alignment; 1 for safetensors
  uint64_t data_offset = 0;  // start of the (first file's) data section

  // Metadata, in file order.
  const std::vector<MetaEntry>& metadata() const { return metadata_; }
  const MetaValue* find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }

  // Typed getters: a missing key or a different type is a sluice::Error naming both.
  uint8_t get_u8(std::string_view key) const;
  int8_t get_i8(std::string_view key) const;
  uint16_t get_u16(std::string_view key) const;
  int16_t get_i16(std::string_view key) const;
  uint32_t get_u32(std::string_view key) const;
  int32_t get_i32(std::string_view key) const;
  uint64_t get_u64(std::string_view key) const;
  int64_t get_i64(std::string_view key) const;
  float get_f32(std::string_view key) const;
  double get_f64(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  const std::string& get_string(std::string_view key) const;
  const MetaValue& get_array(std::string_view key) const;

  // Tensors, in file order (safetensors: in order of their data offsets).
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  const TensorInfo& tensor(std::string_view name) const;  // throws naming the tensor

  const std::vector<SourceFile>& sources() const { return sources_; }
  // The tensor's bytes through the file mapping (pages load on first touch).
  std::span<const uint8_t> tensor_bytes(const TensorInfo& tensor) const;

  // For readers: append in file order. Duplicate keys and tensor names are refused.
  void add_metadata(std::string key, MetaValue value);
  void add_tensor(TensorInfo tensor);
  uint32_t add_source(SourceFile source);
  void attach_file(uint32_t source_index, std::shared_ptr<File> file);
  void sort_tensors_by_location();  // safetensors: file order is data order

 private:
  const MetaValue& require(std::string_view key, MetaType type) const;

  FileFormat format_;
  std::string display_name_;
  std::vector<MetaEntry> metadata_;
  std::unordered_map<std::string, size_t> metadata_index_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
  std::vector<SourceFile> sources_;
};

}  // namespace sluice
