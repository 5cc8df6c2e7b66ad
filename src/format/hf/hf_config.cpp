// HfConfig: reads config.json (bounded size), checks it is a JSON object, and offers getters
// whose errors read `config: <path>: <what> (<key>: <value>)`.
#include "format/hf/hf_config.h"

#include <filesystem>

#include "core/error.h"
#include "io/file.h"

namespace sluice {
namespace {

// config.json files are a few KiB; anything this large is not one.
constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;

}  // namespace

HfConfig HfConfig::load(const std::string& dir_or_file) {
  std::error_code error;
  std::string path = dir_or_file;
  if (std::filesystem::is_directory(dir_or_file, error)) {
    path = (std::filesystem::path(dir_or_file) / "config.json").string();
  }
  File file = File::open(path);
  if (file.size() > kMaxConfigBytes)
    fail("config: ", path, ": file too large (size: ", file.size(), ")");
  std::string text(file.size(), '\0');
  file.read_at(0, {reinterpret_cast<uint8_t*>(text.data()), text.size()});
  return parse(text, path);
}

HfConfig HfConfig::parse(std::string_view text, const std::string& display_name) {
  HfConfig config;
  config.path_ = display_name;
  config.json_ =
      nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (config.json_.is_discarded())
    fail("config: ", display_name, ": not valid JSON (size: ", text.size(), ")");
  if (!config.json_.is_object()) {
    fail("config: ", display_name, ": not a JSON object (type: ", config.json_.type_name(), ")");
  }
  return config;
}

const nlohmann::json& HfConfig::require(std::string_view key) const {
  auto it = json_.find(key);
  if (it == json_.end()) fail("config: ", path_, ": missing key (key: ", key, ")");
  return *it;
}

std::string HfConfig::get_string(std::string_view key) const {
  const auto& value = require(key);
  if (!value.is_string())
    fail("config: ", path_, ": expected a string (", key, ": ", value.dump(), ")");
  return value.get<std::string>();
}

int64_t HfConfig::get_int(std::string_view key) const {
  const auto& value = require(key);
  if (!value.is_number_integer())
    fail("config: ", path_, ": expected an integer (", key, ": ", value.dump(), ")");
  return value.get<int64_t>();
}

double HfConfig::get_number(std::string_view key) const {
  const auto& value = require(key);
  if (!value.is_number())
    fail("config: ", path_, ": expected a number (", key, ": ", value.dump(), ")");
  return value.get<double>();
}

bool HfConfig::get_bool(std::string_view key) const {
  const auto& value = require(key);
  if (!value.is_boolean())
    fail("config: ", path_, ": expected a boolean (", key, ": ", value.dump(), ")");
  return value.get<bool>();
}

}  // namespace sluice
