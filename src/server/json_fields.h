// Fields: typed, validated access to one JSON object of a request. A wrong type, a missing
// required field or a value out of range throws ApiError 400 naming the field by its path
// ("messages[2].content"); absent optional fields are std::nullopt, and JSON null counts as
// absent (clients send it for "default").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace sluice::server {

using Json = nlohmann::ordered_json;

// Parses a request body; malformed JSON or a non-object is ApiError 400.
Json parse_body(const std::string& body);

class Fields {
 public:
  // `path` names the object in messages ("" for the body itself).
  Fields(const Json& object, std::string path);

  const Json* get(const char* key) const;  // nullptr when absent or null
  bool has(const char* key) const { return get(key) != nullptr; }
  std::string name(const char* key) const;  // the field's path, for messages

  std::optional<std::string> string(const char* key) const;
  std::optional<bool> boolean(const char* key) const;
  std::optional<double> number(const char* key, double min, double max) const;
  std::optional<int64_t> integer(const char* key, int64_t min, int64_t max) const;
  const Json* array(const char* key) const;
  const Json* object(const char* key) const;
  std::string required_string(const char* key) const;
  const Json& required_array(const char* key) const;

  [[noreturn]] void fail(const char* key, const std::string& what) const;

 private:
  const Json& object_;
  std::string path_;
};

}  // namespace sluice::server
