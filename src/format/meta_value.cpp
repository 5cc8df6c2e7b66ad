// MetaValue construction and element access. Element bytes are little-endian as in the file;
// the build targets little-endian hosts only (the GGUF reader refuses big-endian files).
#include "format/meta_value.h"

#include <array>

namespace sluice {
namespace {

struct MetaTypeEntry {
  MetaType type;
  std::string_view name;
  uint32_t size;
};

constexpr std::array kMetaTypes = {
    MetaTypeEntry{MetaType::U8, "u8", 1},         MetaTypeEntry{MetaType::I8, "i8", 1},
    MetaTypeEntry{MetaType::U16, "u16", 2},       MetaTypeEntry{MetaType::I16, "i16", 2},
    MetaTypeEntry{MetaType::U32, "u32", 4},       MetaTypeEntry{MetaType::I32, "i32", 4},
    MetaTypeEntry{MetaType::F32, "f32", 4},       MetaTypeEntry{MetaType::BOOL, "bool", 1},
    MetaTypeEntry{MetaType::STRING, "string", 0}, MetaTypeEntry{MetaType::ARRAY, "array", 0},
    MetaTypeEntry{MetaType::U64, "u64", 8},       MetaTypeEntry{MetaType::I64, "i64", 8},
    MetaTypeEntry{MetaType::F64, "f64", 8},
};

template <class T>
T load(const std::vector<uint8_t>& bytes, uint64_t i) {
  T value;
  std::memcpy(&value, bytes.data() + i * sizeof(T), sizeof(T));
  return value;
}

}  // namespace

std::optional<MetaType> meta_type_from_id(uint32_t id) {
  if (id >= kMetaTypes.size()) return std::nullopt;
  return kMetaTypes[id].type;
}

std::string_view meta_type_name(MetaType type) {
  return kMetaTypes[static_cast<uint32_t>(type)].name;
}

uint32_t meta_type_size(MetaType type) {
  return kMetaTypes[static_cast<uint32_t>(type)].size;
}

MetaValue MetaValue::string(std::string value) {
  MetaValue result;
  result.type_ = MetaType::STRING;
  result.scalar_ = std::move(value);
  return result;
}

MetaValue MetaValue::raw_array(MetaType element_type, std::vector<uint8_t> bytes, uint64_t length) {
  MetaValue result;
  result.type_ = MetaType::ARRAY;
  result.element_type_ = element_type;
  result.length_ = length;
  result.element_bytes_ = std::move(bytes);
  return result;
}

MetaValue MetaValue::string_array(std::vector<std::string> values) {
  MetaValue result;
  result.type_ = MetaType::ARRAY;
  result.element_type_ = MetaType::STRING;
  result.length_ = values.size();
  result.strings_ = std::move(values);
  return result;
}

MetaValue MetaValue::array_of_arrays(std::vector<MetaValue> values) {
  MetaValue result;
  result.type_ = MetaType::ARRAY;
  result.element_type_ = MetaType::ARRAY;
  result.length_ = values.size();
  result.arrays_ = std::move(values);
  return result;
}

const std::string* MetaValue::as_string() const {
  return std::get_if<std::string>(&scalar_);
}

const std::vector<std::string>* MetaValue::strings() const {
  return is_array() && element_type_ == MetaType::STRING ? &strings_ : nullptr;
}

const std::vector<MetaValue>* MetaValue::arrays() const {
  return is_array() && element_type_ == MetaType::ARRAY ? &arrays_ : nullptr;
}

double MetaValue::element_as_double(uint64_t i) const {
  switch (element_type_) {
    case MetaType::F32:
      return load<float>(element_bytes_, i);
    case MetaType::F64:
      return load<double>(element_bytes_, i);
    case MetaType::U64:
      return static_cast<double>(load<uint64_t>(element_bytes_, i));
    default:
      return static_cast<double>(element_as_i64(i));
  }
}

int64_t MetaValue::element_as_i64(uint64_t i) const {
  switch (element_type_) {
    case MetaType::U8:
      return load<uint8_t>(element_bytes_, i);
    case MetaType::I8:
      return load<int8_t>(element_bytes_, i);
    case MetaType::U16:
      return load<uint16_t>(element_bytes_, i);
    case MetaType::I16:
      return load<int16_t>(element_bytes_, i);
    case MetaType::U32:
      return load<uint32_t>(element_bytes_, i);
    case MetaType::I32:
      return load<int32_t>(element_bytes_, i);
    case MetaType::BOOL:
      return element_bytes_[i] != 0 ? 1 : 0;
    case MetaType::U64:
      return static_cast<int64_t>(load<uint64_t>(element_bytes_, i));
    case MetaType::I64:
      return load<int64_t>(element_bytes_, i);
    case MetaType::F32:  // not integers: converting NaN or 1e30 would be undefined
    case MetaType::F64:
    case MetaType::STRING:
    case MetaType::ARRAY:
      break;
  }
  return 0;
}

uint64_t MetaValue::element_as_u64(uint64_t i) const {
  if (element_type_ == MetaType::U64) return load<uint64_t>(element_bytes_, i);
  return static_cast<uint64_t>(element_as_i64(i));
}

}  // namespace sluice
