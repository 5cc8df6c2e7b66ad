// Safetensors reader: the 8-byte header length, the JSON header (parsed with a depth cap and a
// duplicate-name check), each tensor entry, and the rule that tensor ranges tile the data
// section exactly. Sharded snapshots add the index's weight_map checks. Errors read
// `safetensors: <path>: <what> (<field or tensor>: <value>)`.
#include "format/safetensors/safetensors_reader.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <unordered_set>

#include "core/checked_math.h"
#include "core/error.h"
#include "format/text_checks.h"

namespace sluice {
namespace {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

// The deepest a valid header goes: root object > tensor entry > shape array > number.
constexpr int kMaxJsonDepth = 3;

template <class... Parts>
[[noreturn]] void refuse(const std::string& name, std::string_view what, const Parts&... detail) {
  std::ostringstream text;
  (text << ... << detail);
  fail("safetensors: ", name, ": ", what, " (", text.str(), ")");
}

struct DtypeEntry {
  std::string_view name;
  QType type;
};

constexpr DtypeEntry kDtypes[] = {
    {"F64", QType::F64},   {"F32", QType::F32},         {"F16", QType::F16},
    {"BF16", QType::BF16}, {"F8_E4M3", QType::F8_E4M3}, {"F8_E5M2", QType::F8_E5M2},
    {"I64", QType::I64},   {"I32", QType::I32},         {"I16", QType::I16},
    {"I8", QType::I8},     {"U8", QType::U8},           {"BOOL", QType::BOOL},
};

// Parses the header text; refuses invalid JSON, nesting deeper than a valid header has, and a
// tensor name given twice (JSON parsers otherwise keep the last silently).
Json parse_header_json(std::string_view text, const std::string& name) {
  bool too_deep = false;
  std::string duplicate;
  std::unordered_set<std::string> top_keys;
  Json::parser_callback_t check = [&](int depth, nlohmann::json::parse_event_t event,
                                      Json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if ((event == Event::object_start || event == Event::array_start) && depth >= kMaxJsonDepth) {
      too_deep = true;
      return false;
    }
    if (event == Event::key && depth == 1 && !top_keys.insert(parsed.get<std::string>()).second) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  Json header = Json::parse(text.begin(), text.end(), check, /*allow_exceptions=*/false);
  if (header.is_discarded())
    refuse(name, "header is not valid JSON", "header_length: ", text.size());
  if (too_deep)
    refuse(name, "header nests deeper than a safetensors header", "depth: ", kMaxJsonDepth + 1);
  if (!duplicate.empty()) refuse(name, "duplicate tensor name", "tensor: ", printable(duplicate));
  if (!header.is_object())
    refuse(name, "header is not a JSON object", "type: ", header.type_name());
  return header;
}

uint64_t json_u64(const Json& value, const std::string& name, const std::string& tensor,
                  std::string_view field) {
  if (!value.is_number_unsigned()) {
    refuse(name, std::string(field) + " must be a non-negative integer", printable(tensor), ": ",
           value.dump(-1, ' ', false, Json::error_handler_t::replace));
  }
  return value.get<uint64_t>();
}

QType parse_dtype(const Json& entry, const std::string& name, const std::string& tensor) {
  auto it = entry.find("dtype");
  if (it == entry.end() || !it->is_string())
    refuse(name, "tensor has no dtype string", "tensor: ", printable(tensor));
  const auto& dtype = it->get_ref<const std::string&>();
  for (const auto& known : kDtypes) {
    if (known.name == dtype) return known.type;
  }
  refuse(name, "unsupported dtype", printable(tensor), ": ", printable(dtype));
}

void parse_shape(const Json& entry, const std::string& name, TensorInfo& tensor) {
  auto it = entry.find("shape");
  if (it == entry.end() || !it->is_array())
    refuse(name, "tensor has no shape array", "tensor: ", printable(tensor.name));
  if (it->size() > kMaxDims) {
    refuse(name, "tensor has more than 4 dimensions", printable(tensor.name), ": ", it->size());
  }
  tensor.n_dims = static_cast<uint32_t>(it->size());
  uint64_t n_elements = 1;
  // Row-major [.., rows, cols] becomes ne = [cols, rows, ..]: first dimension fastest.
  for (uint32_t d = 0; d < tensor.n_dims; ++d) {
    const uint64_t dim = json_u64((*it)[tensor.n_dims - 1 - d], name, tensor.name, "shape");
    auto product = checked_mul(n_elements, dim);
    if (dim > static_cast<uint64_t>(INT64_MAX) || !product ||
        *product > static_cast<uint64_t>(INT64_MAX)) {
      refuse(name, "tensor element count overflows", printable(tensor.name), ": ", it->dump());
    }
    tensor.ne[d] = dim;
    n_elements = *product;
  }
  tensor.n_elements = n_elements;
}

// Fills name, type, shape, size and the data-relative begin (in `offset`) of one entry.
TensorInfo parse_tensor_entry(const std::string& key, const Json& entry, const std::string& name) {
  if (!entry.is_object()) refuse(name, "tensor entry is not an object", "tensor: ", printable(key));
  TensorInfo tensor;
  tensor.name = key;
  tensor.type = parse_dtype(entry, name, key);
  parse_shape(entry, name, tensor);
  auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2) {
    refuse(name, "tensor needs data_offsets [begin, end]", "tensor: ", printable(key));
  }
  const uint64_t begin = json_u64((*offsets)[0], name, key, "data_offsets");
  const uint64_t end = json_u64((*offsets)[1], name, key, "data_offsets");
  if (end < begin)
    refuse(name, "tensor data_offsets end before they begin", printable(key), ": [", begin, ", ",
           end, "]");
  const uint64_t element_bytes = traits_of(tensor.type).block_bytes;
  auto bytes = checked_mul(tensor.n_elements, element_bytes);
  if (!bytes || *bytes != end - begin) {
    refuse(name, "tensor byte length does not match shape and dtype", printable(key), ": ",
           end - begin, " bytes for ", tensor.n_elements, " elements of ", element_bytes);
  }
  tensor.n_bytes = end - begin;
  tensor.offset = begin;
  return tensor;
}

void add_string_metadata(const Json& metadata, const std::string& name, ModelFile& model) {
  if (!metadata.is_object())
    refuse(name, "__metadata__ is not an object", "type: ", metadata.type_name());
  for (const auto& [key, value] : metadata.items()) {
    if (!value.is_string())
      refuse(name, "__metadata__ value is not a string", "key: ", printable(key));
    if (!model.contains(key)) model.add_metadata(key, MetaValue::string(value.get<std::string>()));
  }
}

// Tensor ranges must cover the data section exactly, in some order: no gap, no overlap, no
// trailing bytes (the reference implementation's rule).
void check_tiling(std::vector<TensorInfo>& tensors, uint64_t data_bytes, const std::string& name) {
  std::sort(tensors.begin(), tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.offset < b.offset; });
  uint64_t expected = 0;
  for (const auto& tensor : tensors) {
    if (tensor.offset != expected) {
      refuse(name,
             tensor.offset < expected ? "tensor data overlaps the previous tensor"
                                      : "gap in the data before tensor",
             printable(tensor.name), ": begins at ", tensor.offset, ", expected ", expected);
    }
    expected = tensor.offset + tensor.n_bytes;
    if (expected > data_bytes) {
      refuse(name, "tensor data extends past the end of the file", printable(tensor.name), ": end ",
             expected, " > ", data_bytes);
    }
  }
  if (expected != data_bytes) {
    refuse(name, "data section is not fully covered by tensors", "data_bytes: ", data_bytes,
           ", covered: ", expected);
  }
}

// Parses one file (or shard) into `model`, its tensors pointing at source `file_index`.
void parse_one(std::span<const uint8_t> bytes, const std::string& name, uint32_t file_index,
               ModelFile& model) {
  if (bytes.size() < 8)
    refuse(name, "file too small for a safetensors header", "size: ", bytes.size());
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data(), 8);
  if (header_bytes > kSafetensorsMaxHeaderBytes)
    refuse(name, "header length exceeds 100 MiB", "header_length: ", header_bytes);
  if (header_bytes > bytes.size() - 8)
    refuse(name, "header length exceeds the file", "header_length: ", header_bytes);
  std::string_view text(reinterpret_cast<const char*>(bytes.data()) + 8, header_bytes);
  if (text.empty() || text.front() != '{')
    refuse(name, "header does not start with '{'", "header_length: ", header_bytes);
  const Json header = parse_header_json(text, name);
  std::vector<TensorInfo> tensors;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      add_string_metadata(value, name, model);
    } else {
      tensors.push_back(parse_tensor_entry(key, value, name));
    }
  }
  const uint64_t data_offset = 8 + header_bytes;
  check_tiling(tensors, bytes.size() - data_offset, name);
  if (file_index == 0) model.data_offset = data_offset;
  for (auto& tensor : tensors) {
    if (model.find_tensor(tensor.name) != nullptr)
      refuse(name, "tensor appears in two shards", "tensor: ", printable(tensor.name));
    tensor.offset += data_offset;
    tensor.file_index = file_index;
    model.add_tensor(std::move(tensor));
  }
}

uint32_t add_mapped_file(const std::string& path, ModelFile& model) {
  auto file = std::make_shared<File>(File::open(path));
  file->map(AccessHint::normal);
  const uint32_t index = model.add_source({path, file->size(), nullptr});
  parse_one(file->bytes(), path, index, model);
  model.attach_file(index, std::move(file));
  return index;
}

Json read_index_json(const std::string& path) {
  File file = File::open(path);
  if (file.size() > kSafetensorsMaxHeaderBytes)
    refuse(path, "index file is larger than 100 MiB", "size: ", file.size());
  std::string text(file.size(), '\0');
  file.read_at(0, {reinterpret_cast<uint8_t*>(text.data()), text.size()});
  Json index = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (index.is_discarded() || !index.is_object())
    refuse(path, "index is not a JSON object", "size: ", text.size());
  return index;
}

void add_index_metadata(const Json& index, ModelFile& model) {
  auto metadata = index.find("metadata");
  if (metadata == index.end() || !metadata->is_object()) return;
  for (const auto& [key, value] : metadata->items()) {
    if (value.is_string())
      model.add_metadata(key, MetaValue::string(value.get<std::string>()));
    else if (value.is_number_unsigned())
      model.add_metadata(key, MetaValue::scalar(value.get<uint64_t>()));
    else if (value.is_number_integer())
      model.add_metadata(key, MetaValue::scalar(value.get<int64_t>()));
    else if (value.is_number_float())
      model.add_metadata(key, MetaValue::scalar(value.get<double>()));
    else if (value.is_boolean())
      model.add_metadata(key, MetaValue::scalar(value.get<bool>()));
    else
      model.add_metadata(
          key, MetaValue::string(value.dump(-1, ' ', false, Json::error_handler_t::replace)));
  }
}

// The shard named by weight_map must be a plain file name inside the snapshot directory.
std::string shard_path(const fs::path& dir, const std::string& shard,
                       const std::string& index_path) {
  const fs::path relative(shard);
  bool escapes = shard.empty() || relative.is_absolute();
  for (const auto& part : relative) escapes = escapes || part == "..";
  if (escapes)
    refuse(index_path, "weight_map names a file outside the directory", "file: ", printable(shard));
  const fs::path full = dir / relative;
  std::error_code error;
  if (!fs::is_regular_file(full, error))
    refuse(index_path, "weight_map names a missing shard", "file: ", printable(shard));
  return full.string();
}

ModelFile read_sharded(const std::string& index_path, const std::string& display_name) {
  const Json index = read_index_json(index_path);
  auto weight_map = index.find("weight_map");
  if (weight_map == index.end() || !weight_map->is_object())
    refuse(index_path, "index has no weight_map object", "key: ", "weight_map");
  const fs::path dir = fs::path(index_path).parent_path();
  std::map<std::string, std::string> shard_of;  // tensor -> shard file name
  std::set<std::string> shards;
  for (const auto& [tensor, shard] : weight_map->items()) {
    if (!shard.is_string())
      refuse(index_path, "weight_map value is not a file name", "tensor: ", printable(tensor));
    shard_of[tensor] = shard.get<std::string>();
    shards.insert(shard.get<std::string>());
  }
  ModelFile model(FileFormat::safetensors, display_name);
  add_index_metadata(index, model);
  std::map<std::string, uint32_t> index_of_shard;
  for (const auto& shard : shards) {
    index_of_shard[shard] = add_mapped_file(shard_path(dir, shard, index_path), model);
  }
  for (const auto& [tensor, shard] : shard_of) {
    const TensorInfo* found = model.find_tensor(tensor);
    if (found == nullptr || found->file_index != index_of_shard[shard]) {
      refuse(index_path, "tensor listed in weight_map is missing from its shard", printable(tensor),
             ": ", printable(shard));
    }
  }
  model.sort_tensors_by_location();
  return model;
}

}  // namespace

ModelFile parse_safetensors(std::span<const uint8_t> bytes, const std::string& display_name) {
  ModelFile model(FileFormat::safetensors, display_name);
  const uint32_t index = model.add_source({display_name, bytes.size(), nullptr});
  parse_one(bytes, display_name, index, model);
  return model;
}

ModelFile read_safetensors(const std::string& file_or_dir) {
  std::error_code error;
  if (fs::is_directory(file_or_dir, error)) {
    const fs::path dir(file_or_dir);
    if (fs::is_regular_file(dir / "model.safetensors.index.json", error)) {
      return read_sharded((dir / "model.safetensors.index.json").string(), file_or_dir);
    }
    if (!fs::is_regular_file(dir / "model.safetensors", error)) {
      refuse(file_or_dir, "directory has no model.safetensors or model.safetensors.index.json",
             "directory: ", file_or_dir);
    }
    ModelFile model(FileFormat::safetensors, file_or_dir);
    add_mapped_file((dir / "model.safetensors").string(), model);
    return model;
  }
  if (file_or_dir.ends_with(".index.json")) return read_sharded(file_or_dir, file_or_dir);
  ModelFile model(FileFormat::safetensors, file_or_dir);
  add_mapped_file(file_or_dir, model);
  return model;
}

}  // namespace sluice
