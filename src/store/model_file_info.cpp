// inspect_model_file: turns a validated ModelFile into the public summary structs, rendering
// metadata values as JSON (arrays cut to a preview). Reads headers only, never tensor data.
#include "sluice/model_file_info.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "format/model_file.h"
#include "format/model_file_open.h"

namespace sluice {
namespace {

using Json = nlohmann::json;

// An f32 shown as the shortest decimal that reads back as the same float ("1e-05", not the
// double expansion "9.999999747378752e-06"); non-finite values become null as JSON requires.
Json float_json(float value) {
  if (!std::isfinite(value)) return nullptr;
  char text[32];
  auto result = std::to_chars(text, text + sizeof(text), value);
  return std::strtod(std::string(text, result.ptr).c_str(), nullptr);
}

Json scalar_json(const MetaValue& value) {
  return std::visit(
      [](const auto& scalar) -> Json {
        using T = std::decay_t<decltype(scalar)>;
        if constexpr (std::is_same_v<T, float>)
          return float_json(scalar);
        else
          return scalar;
      },
      value.scalar_value());
}

Json array_json(const MetaValue& value, size_t preview) {
  Json out = Json::array();
  const uint64_t shown = std::min<uint64_t>(value.array_length(), preview);
  for (uint64_t i = 0; i < shown; ++i) {
    switch (value.element_type()) {
      case MetaType::STRING:
        out.push_back((*value.strings())[i]);
        break;
      case MetaType::ARRAY:
        out.push_back(array_json((*value.arrays())[i], preview));
        break;
      case MetaType::BOOL:
        out.push_back(value.element_bytes()[i] != 0);
        break;
      case MetaType::F32:
        out.push_back(float_json(static_cast<float>(value.element_as_double(i))));
        break;
      case MetaType::F64:
        out.push_back(value.element_as_double(i));
        break;
      case MetaType::U64:
        out.push_back(value.element_as_u64(i));
        break;
      default:
        out.push_back(value.element_as_i64(i));
        break;
    }
  }
  return out;
}

MetadataSummary summarize(const MetaEntry& entry, size_t preview) {
  MetadataSummary summary;
  summary.key = entry.key;
  summary.type = meta_type_name(entry.value.type());
  const Json value =
      entry.value.is_array() ? array_json(entry.value, preview) : scalar_json(entry.value);
  if (entry.value.is_array()) {
    summary.element_type = meta_type_name(entry.value.element_type());
    summary.length = entry.value.array_length();
  }
  // Vocabulary strings may hold partial UTF-8 sequences; show them with U+FFFD, never throw.
  summary.value_json = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  return summary;
}

TensorSummary summarize(const TensorInfo& tensor) {
  TensorSummary summary;
  summary.name = tensor.name;
  summary.type = qtype_name(tensor.type);
  summary.shape.assign(tensor.shape().begin(), tensor.shape().end());
  summary.offset = tensor.offset;
  summary.bytes = tensor.n_bytes;
  summary.file_index = tensor.file_index;
  return summary;
}

}  // namespace

ModelFileSummary inspect_model_file(const std::string& path, size_t array_preview) {
  const ModelFile model = read_model_file(path);
  ModelFileSummary summary;
  summary.path = path;
  summary.format = model.format_name();
  summary.version = model.version;
  summary.alignment = model.alignment;
  summary.data_offset = model.data_offset;
  for (const auto& source : model.sources()) {
    summary.files.push_back(source.path);
    summary.file_size += source.size;
  }
  for (const auto& entry : model.metadata())
    summary.metadata.push_back(summarize(entry, array_preview));
  for (const auto& tensor : model.tensors()) summary.tensors.push_back(summarize(tensor));
  return summary;
}

}  // namespace sluice
