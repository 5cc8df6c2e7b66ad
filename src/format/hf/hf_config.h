// HfConfig: a Hugging Face snapshot's config.json, loaded and exposed as JSON with a few typed
// getters that name the key on error. It does not interpret architectures; model/ does.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace sluice {

class HfConfig {
 public:
  // `dir_or_file`: a snapshot directory (reads <dir>/config.json) or the config file itself.
  static HfConfig load(const std::string& dir_or_file);
  static HfConfig parse(std::string_view text, const std::string& display_name);

  const nlohmann::json& json() const { return json_; }
  const std::string& path() const { return path_; }
  bool contains(std::string_view key) const { return json_.contains(key); }

  std::string get_string(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  double get_number(std::string_view key) const;  // integers or floats
  bool get_bool(std::string_view key) const;

 private:
  const nlohmann::json& require(std::string_view key) const;

  std::string path_;
  nlohmann::json json_;
};

}  // namespace sluice
