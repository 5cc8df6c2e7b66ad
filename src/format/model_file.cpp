// ModelFile: lookups, typed getters with errors that name the key and both types, and the
// append operations the readers use.
#include "format/model_file.h"

#include <algorithm>
#include <tuple>

#include "core/error.h"

namespace sluice {

ModelFile::ModelFile(FileFormat format, std::string display_name)
    : format_(format), display_name_(std::move(display_name)) {}

std::string_view ModelFile::format_name() const {
  return format_ == FileFormat::gguf ? "gguf" : "safetensors";
}

const MetaValue* ModelFile::find(std::string_view key) const {
  auto it = metadata_index_.find(std::string(key));
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].value;
}

const MetaValue& ModelFile::require(std::string_view key, MetaType type) const {
  const MetaValue* value = find(key);
  if (value == nullptr) {
    fail(format_name(), ": ", display_name_, ": missing metadata key (key: ", key, ")");
  }
  if (value->type() != type) {
    fail(format_name(), ": ", display_name_, ": metadata key has type ",
         meta_type_name(value->type()), ", expected ", meta_type_name(type), " (key: ", key, ")");
  }
  return *value;
}

uint8_t ModelFile::get_u8(std::string_view key) const {
  return *require(key, MetaType::U8).as<uint8_t>();
}
int8_t ModelFile::get_i8(std::string_view key) const {
  return *require(key, MetaType::I8).as<int8_t>();
}
uint16_t ModelFile::get_u16(std::string_view key) const {
  return *require(key, MetaType::U16).as<uint16_t>();
}
int16_t ModelFile::get_i16(std::string_view key) const {
  return *require(key, MetaType::I16).as<int16_t>();
}
uint32_t ModelFile::get_u32(std::string_view key) const {
  return *require(key, MetaType::U32).as<uint32_t>();
}
int32_t ModelFile::get_i32(std::string_view key) const {
  return *require(key, MetaType::I32).as<int32_t>();
}
uint64_t ModelFile::get_u64(std::string_view key) const {
  return *require(key, MetaType::U64).as<uint64_t>();
}
int64_t ModelFile::get_i64(std::string_view key) const {
  return *require(key, MetaType::I64).as<int64_t>();
}
float ModelFile::get_f32(std::string_view key) const {
  return *require(key, MetaType::F32).as<float>();
}
double ModelFile::get_f64(std::string_view key) const {
  return *require(key, MetaType::F64).as<double>();
}
bool ModelFile::get_bool(std::string_view key) const {
  return *require(key, MetaType::BOOL).as<bool>();
}
const std::string& ModelFile::get_string(std::string_view key) const {
  return *require(key, MetaType::STRING).as_string();
}
const MetaValue& ModelFile::get_array(std::string_view key) const {
  return require(key, MetaType::ARRAY);
}

const TensorInfo* ModelFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& ModelFile::tensor(std::string_view name) const {
  const TensorInfo* found = find_tensor(name);
  if (found == nullptr)
    fail(format_name(), ": ", display_name_, ": no such tensor (tensor: ", name, ")");
  return *found;
}

std::span<const uint8_t> ModelFile::tensor_bytes(const TensorInfo& tensor) const {
  const SourceFile& source = sources_.at(tensor.file_index);
  if (!source.file) {
    fail(format_name(), ": ", display_name_,
         ": tensor data not backed by a file (tensor: ", tensor.name, ")");
  }
  return source.file->view(tensor.offset, tensor.n_bytes);
}

void ModelFile::add_metadata(std::string key, MetaValue value) {
  if (metadata_index_.count(key) != 0) {
    fail(format_name(), ": ", display_name_, ": duplicate metadata key (key: ", key, ")");
  }
  metadata_index_.emplace(key, metadata_.size());
  metadata_.push_back({std::move(key), std::move(value)});
}

void ModelFile::add_tensor(TensorInfo tensor) {
  if (tensor_index_.count(tensor.name) != 0) {
    fail(format_name(), ": ", display_name_, ": duplicate tensor name (tensor: ", tensor.name, ")");
  }
  tensor_index_.emplace(tensor.name, tensors_.size());
  tensors_.push_back(std::move(tensor));
}

uint32_t ModelFile::add_source(SourceFile source) {
  sources_.push_back(std::move(source));
  return static_cast<uint32_t>(sources_.size() - 1);
}

void ModelFile::attach_file(uint32_t source_index, std::shared_ptr<File> file) {
  sources_.at(source_index).file = std::move(file);
}

void ModelFile::sort_tensors_by_location() {
  std::stable_sort(tensors_.begin(), tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::tie(a.file_index, a.offset) < std::tie(b.file_index, b.offset);
  });
  tensor_index_.clear();
  for (size_t i = 0; i < tensors_.size(); ++i) tensor_index_.emplace(tensors_[i].name, i);
}

}  // namespace sluice
