// MetaValue: one typed metadata value as GGUF defines them — twelve scalar types, strings, and
// arrays of any of them (arrays of arrays included). Safetensors metadata maps onto the same
// type. Knows nothing of file layout or of what any key means.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace sluice {

// Numbered exactly as GGUF numbers its value types.
enum class MetaType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};

std::optional<MetaType> meta_type_from_id(uint32_t id);
std::string_view meta_type_name(MetaType type);  // "u32", "string", "array", ...
// Bytes of one element in a GGUF file for fixed-size types; 0 for STRING and ARRAY.
uint32_t meta_type_size(MetaType type);

template <class T>
struct AlwaysFalse : std::false_type {};

// The MetaType of a C++ scalar type; other types do not compile.
template <class T>
constexpr MetaType meta_type_of() {
  if constexpr (std::is_same_v<T, uint8_t>)
    return MetaType::U8;
  else if constexpr (std::is_same_v<T, int8_t>)
    return MetaType::I8;
  else if constexpr (std::is_same_v<T, uint16_t>)
    return MetaType::U16;
  else if constexpr (std::is_same_v<T, int16_t>)
    return MetaType::I16;
  else if constexpr (std::is_same_v<T, uint32_t>)
    return MetaType::U32;
  else if constexpr (std::is_same_v<T, int32_t>)
    return MetaType::I32;
  else if constexpr (std::is_same_v<T, float>)
    return MetaType::F32;
  else if constexpr (std::is_same_v<T, bool>)
    return MetaType::BOOL;
  else if constexpr (std::is_same_v<T, uint64_t>)
    return MetaType::U64;
  else if constexpr (std::is_same_v<T, int64_t>)
    return MetaType::I64;
  else if constexpr (std::is_same_v<T, double>)
    return MetaType::F64;
  else
    static_assert(AlwaysFalse<T>::value, "not a GGUF scalar type");
}

class MetaValue {
 public:
  MetaValue() = default;

  template <class T>
  static MetaValue scalar(T value) {
    MetaValue result;
    result.type_ = meta_type_of<T>();
    result.scalar_ = value;
    return result;
  }
  static MetaValue string(std::string value);

  // Arrays of fixed-size elements keep their little-endian file bytes: a vocabulary's scores
  // stay one compact buffer instead of 150k variants.
  template <class T>
  static MetaValue array(const std::vector<T>& values) {
    static_assert(std::is_arithmetic_v<T>);
    std::vector<uint8_t> bytes(values.size() * meta_type_size(meta_type_of<T>()));
    for (size_t i = 0; i < values.size(); ++i) {
      T value = values[i];
      std::memcpy(bytes.data() + i * sizeof(T), &value, sizeof(T));
    }
    return raw_array(meta_type_of<T>(), std::move(bytes), values.size());
  }
  // `bytes` holds `length` packed little-endian elements of `element_type` (bool: one byte).
  static MetaValue raw_array(MetaType element_type, std::vector<uint8_t> bytes, uint64_t length);
  static MetaValue string_array(std::vector<std::string> values);
  // Elements may be arrays of differing element types, as GGUF permits.
  static MetaValue array_of_arrays(std::vector<MetaValue> values);

  MetaType type() const { return type_; }
  bool is_array() const { return type_ == MetaType::ARRAY; }
  MetaType element_type() const { return element_type_; }  // arrays only
  uint64_t array_length() const { return length_; }        // arrays only

  // The scalar when its type is exactly T; nullopt otherwise.
  template <class T>
  std::optional<T> as() const {
    if (type_ != meta_type_of<T>()) return std::nullopt;
    return std::get<T>(scalar_);
  }
  const std::string* as_string() const;

  // Copies of array elements when the element type is exactly T; nullopt otherwise.
  template <class T>
  std::optional<std::vector<T>> array_as() const {
    if (!is_array() || element_type_ != meta_type_of<T>()) return std::nullopt;
    std::vector<T> values(length_);
    for (uint64_t i = 0; i < length_; ++i) {
      if constexpr (std::is_same_v<T, bool>) {
        values[i] = element_bytes_[i] != 0;  // any nonzero byte is true, as in ggml
      } else {
        std::memcpy(&values[i], element_bytes_.data() + i * sizeof(T), sizeof(T));
      }
    }
    return values;
  }
  const std::vector<std::string>* strings() const;  // STRING arrays
  const std::vector<MetaValue>* arrays() const;     // arrays of arrays
  const std::vector<uint8_t>& element_bytes() const { return element_bytes_; }

  // Element i of a numeric or bool array, widened (for display and numeric conversion).
  double element_as_double(uint64_t i) const;
  // Element i of an integer or bool array, exactly; for 64-bit unsigned values above INT64_MAX
  // use element_as_u64.
  int64_t element_as_i64(uint64_t i) const;
  uint64_t element_as_u64(uint64_t i) const;

  // The scalar's value as the wider types, for display: bits are exact for integers.
  using Scalar = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                              std::string, uint64_t, int64_t, double>;
  const Scalar& scalar_value() const { return scalar_; }

  bool operator==(const MetaValue& other) const = default;

 private:
  MetaType type_ = MetaType::U8;
  Scalar scalar_;                         // when !is_array()
  MetaType element_type_ = MetaType::U8;  // arrays
  uint64_t length_ = 0;                   // arrays
  std::vector<uint8_t> element_bytes_;    // [length_ * size] fixed-size elements
  std::vector<std::string> strings_;      // [length_] STRING elements
  std::vector<MetaValue> arrays_;         // [length_] ARRAY elements
};

}  // namespace sluice
