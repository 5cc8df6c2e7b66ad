// `sluice inspect FILE [--json]`: the header of a GGUF file or a safetensors file/snapshot —
// metadata (arrays as element type, length and first elements), the tensor table, totals by
// type and file size — as aligned text or one JSON document.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "sluice/model_file_info.h"

namespace sluice::cli {
namespace {

struct InspectOptions {
  std::string path;
  bool json = false;
  size_t preview = 8;
};

struct TypeTotal {
  uint64_t count = 0;
  uint64_t bytes = 0;
};

std::map<std::string, TypeTotal> totals_by_type(const ModelFileSummary& summary) {
  std::map<std::string, TypeTotal> totals;
  for (const auto& tensor : summary.tensors) {
    totals[tensor.type].count += 1;
    totals[tensor.type].bytes += tensor.bytes;
  }
  return totals;
}

std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

nlohmann::ordered_json to_json(const ModelFileSummary& summary) {
  nlohmann::ordered_json out = {
      {"path", summary.path},           {"format", summary.format},
      {"version", summary.version},     {"file_size", summary.file_size},
      {"alignment", summary.alignment}, {"data_offset", summary.data_offset},
      {"files", summary.files}};
  auto& metadata = out["metadata"] = nlohmann::ordered_json::array();
  for (const auto& entry : summary.metadata) {
    nlohmann::ordered_json item = {{"key", entry.key}, {"type", entry.type}};
    if (entry.type == "array") {
      item["element_type"] = entry.element_type;
      item["length"] = entry.length;
    }
    item["value"] = nlohmann::ordered_json::parse(entry.value_json);
    metadata.push_back(std::move(item));
  }
  auto& tensors = out["tensors"] = nlohmann::ordered_json::array();
  for (const auto& tensor : summary.tensors) {
    tensors.push_back({{"name", tensor.name},
                       {"type", tensor.type},
                       {"shape", tensor.shape},
                       {"offset", tensor.offset},
                       {"bytes", tensor.bytes},
                       {"file_index", tensor.file_index}});
  }
  auto& totals = out["totals"] = nlohmann::ordered_json::object();
  for (const auto& [type, total] : totals_by_type(summary)) {
    totals[type] = {{"tensors", total.count}, {"bytes", total.bytes}};
  }
  return out;
}

// Text mode keeps one line per key: arrays say when elements were left out, and long values
// (chat templates) are cut.
std::string display_value(const MetadataSummary& entry, size_t preview) {
  constexpr size_t kMaxChars = 160;
  std::string value = entry.value_json;
  if (entry.type == "array" && entry.length > preview && !value.empty()) {
    value.insert(value.size() - 1, preview == 0 ? "..." : ", ...");
  }
  if (value.size() > kMaxChars) value = value.substr(0, kMaxChars) + "...";
  return value;
}

void print_metadata(const ModelFileSummary& summary, size_t preview) {
  size_t key_width = 0;
  for (const auto& entry : summary.metadata) key_width = std::max(key_width, entry.key.size());
  std::printf("metadata: %zu keys\n", summary.metadata.size());
  for (const auto& entry : summary.metadata) {
    std::string type = entry.type;
    if (type == "array")
      type = "array[" + entry.element_type + "; " + std::to_string(entry.length) + "]";
    std::printf("  %-*s  %-22s  %s\n", static_cast<int>(key_width), entry.key.c_str(), type.c_str(),
                display_value(entry, preview).c_str());
  }
}

void print_tensors(const ModelFileSummary& summary) {
  size_t name_width = 4;
  for (const auto& tensor : summary.tensors) name_width = std::max(name_width, tensor.name.size());
  std::printf("tensors: %zu\n", summary.tensors.size());
  std::printf("  %-*s  %-8s  %-24s  %12s  %12s\n", static_cast<int>(name_width), "name", "type",
              "shape", "offset", "bytes");
  for (const auto& tensor : summary.tensors) {
    std::printf("  %-*s  %-8s  %-24s  %12llu  %12llu\n", static_cast<int>(name_width),
                tensor.name.c_str(), tensor.type.c_str(), shape_text(tensor.shape).c_str(),
                static_cast<unsigned long long>(tensor.offset),
                static_cast<unsigned long long>(tensor.bytes));
  }
}

void print_text(const ModelFileSummary& summary, size_t preview) {
  std::printf("file: %s\n", summary.path.c_str());
  std::printf("format: %s", summary.format.c_str());
  if (summary.format == "gguf")
    std::printf(" v%u, alignment %llu", summary.version,
                static_cast<unsigned long long>(summary.alignment));
  std::printf(", data offset %llu\n", static_cast<unsigned long long>(summary.data_offset));
  std::printf("size: %llu bytes in %zu file(s)\n",
              static_cast<unsigned long long>(summary.file_size), summary.files.size());
  print_metadata(summary, preview);
  print_tensors(summary);
  std::printf("totals by type:\n");
  uint64_t all_bytes = 0;
  for (const auto& [type, total] : totals_by_type(summary)) {
    std::printf("  %-8s  %6llu tensors  %14llu bytes\n", type.c_str(),
                static_cast<unsigned long long>(total.count),
                static_cast<unsigned long long>(total.bytes));
    all_bytes += total.bytes;
  }
  std::printf("  %-8s  %6zu tensors  %14llu bytes\n", "all", summary.tensors.size(),
              static_cast<unsigned long long>(all_bytes));
}

}  // namespace

Command add_inspect_command(CLI::App& parent) {
  auto options = std::make_shared<InspectOptions>();
  CLI::App* app = parent.add_subcommand("inspect", "Show a model file's metadata and tensor table");
  app->add_option("file", options->path, "GGUF file, .safetensors file or snapshot directory")
      ->required();
  app->add_flag("--json", options->json, "Print one JSON document instead of text");
  app->add_option("--array-preview", options->preview, "Array elements to show (default 8)");
  return {app, [options] {
            const ModelFileSummary summary = inspect_model_file(options->path, options->preview);
            if (options->json) {
              std::printf("%s\n",
                          to_json(summary)
                              .dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace)
                              .c_str());
            } else {
              print_text(summary, options->preview);
            }
            return 0;
          }};
}

}  // namespace sluice::cli
