// JSON in and out of jinja values. In: nlohmann::ordered_json keeps key order (Python dicts do).
// Out: Python's json.dumps exactly — separators, indent, ensure_ascii, sort_keys, float repr —
// because templates embed tool schemas with `tojson` and the bytes must match.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "text/jinja/value.h"

namespace sluice::jinja {

Value value_from_json(const nlohmann::ordered_json& j);

struct JsonDumpOptions {
  std::optional<std::string> indent;  // None, or the string one level of indent adds
  std::optional<std::pair<std::string, std::string>> separators;  // (item, key)
  bool ensure_ascii = false;
  bool sort_keys = false;
};

// Errors carry Python's message ("Object of type Undefined is not JSON serializable").
std::string dump_json(const Value& v, const JsonDumpOptions& options);

}  // namespace sluice::jinja
