// Fields: every check names the field by its path and says what was expected.
#include "server/json_fields.h"

#include <cmath>

#include "server/api_error.h"

namespace sluice::server {

Json parse_body(const std::string& body) {
  Json parsed = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) throw ApiError(400, "the request body is not valid JSON");
  if (!parsed.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return parsed;
}

Fields::Fields(const Json& object, std::string path) : object_(object), path_(std::move(path)) {
  if (!object_.is_object()) {
    throw ApiError(400,
                   "'" + (path_.empty() ? std::string("body") : path_) + "' must be a JSON object",
                   path_);
  }
}

const Json* Fields::get(const char* key) const {
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string Fields::name(const char* key) const {
  return path_.empty() ? std::string(key) : path_ + "." + key;
}

void Fields::fail(const char* key, const std::string& what) const {
  throw ApiError(400, "'" + name(key) + "' " + what, name(key));
}

std::optional<std::string> Fields::string(const char* key) const {
  const Json* value = get(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_string()) fail(key, "must be a string");
  return value->get<std::string>();
}

std::optional<bool> Fields::boolean(const char* key) const {
  const Json* value = get(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_boolean()) fail(key, "must be true or false");
  return value->get<bool>();
}

std::optional<double> Fields::number(const char* key, double min, double max) const {
  const Json* value = get(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number()) fail(key, "must be a number");
  const double v = value->get<double>();
  if (!std::isfinite(v) || v < min || v > max) {
    fail(key, "must be between " + Json(min).dump() + " and " + Json(max).dump() + ", got " +
                  value->dump());
  }
  return v;
}

std::optional<int64_t> Fields::integer(const char* key, int64_t min, int64_t max) const {
  const Json* value = get(key);
  if (value == nullptr) return std::nullopt;
  // 1.0 is an integer to JSON; 1.5 is not.
  if (!value->is_number() ||
      (value->is_number_float() && value->get<double>() != std::floor(value->get<double>()))) {
    fail(key, "must be an integer");
  }
  const double as_double = value->get<double>();
  if (as_double < double(min) || as_double > double(max)) {
    fail(key, "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " +
                  value->dump());
  }
  return value->is_number_float() ? int64_t(as_double) : value->get<int64_t>();
}

const Json* Fields::array(const char* key) const {
  const Json* value = get(key);
  if (value != nullptr && !value->is_array()) fail(key, "must be an array");
  return value;
}

const Json* Fields::object(const char* key) const {
  const Json* value = get(key);
  if (value != nullptr && !value->is_object()) fail(key, "must be an object");
  return value;
}

std::string Fields::required_string(const char* key) const {
  std::optional<std::string> value = string(key);
  if (!value) fail(key, "is required");
  return *value;
}

const Json& Fields::required_array(const char* key) const {
  const Json* value = array(key);
  if (value == nullptr) fail(key, "is required");
  return *value;
}

}  // namespace sluice::server
