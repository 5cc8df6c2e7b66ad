// The table of architectures, in one place.
#include "model/registry.h"

#include <string_view>

#include "core/error.h"
#include "model/arch/architectures.h"
#include "model/hf_snapshot.h"

namespace sluice::model {
namespace {

struct ArchEntry {
  std::string_view name;
  std::unique_ptr<LanguageModel> (*make)(const ModelFile&);
};

constexpr ArchEntry kArchitectures[] = {
    {"llama", make_llama},         {"qwen2", make_qwen2},
    {"qwen3", make_qwen3},         {"gemma3", make_gemma3},
    {"gemma4", make_gemma4},       {"muse-glimmer", make_muse_glimmer},
    {"qwen3moe", make_qwen3moe},   {"olmoe", make_olmoe},
    {"glm4moe", make_glm4moe},     {"deepseek2", make_deepseek2},
    {"glm-dsa", make_glm_dsa},     {"gpt-oss", make_gpt_oss},
    {"qwen35", make_qwen35},       {"qwen35moe", make_qwen35moe},
    {"qwen3next", make_qwen3next}, {"laguna", make_laguna},
    {"deepseek4", make_deepseek4}, {"kimi-linear", make_kimi_linear},
};

}  // namespace

std::vector<std::string> supported_architectures() {
  std::vector<std::string> names;
  for (const ArchEntry& entry : kArchitectures) names.emplace_back(entry.name);
  return names;
}

std::unique_ptr<LanguageModel> load_language_model(const ModelFile& file) {
  // The view shares the snapshot's mapped files, which `file` keeps alive for the model.
  if (is_hf_snapshot(file)) {
    ModelFile view = gguf_view_of_hf_snapshot(file);
    if (view.contains(kHfFp8BlockScaled)) {
      fail(file.display_name(),
           ": an FP8 block-scaled checkpoint runs after conversion: sluice "
           "convert DIR -o MODEL.gguf [--type Q8_0|Q4_K|…]");
    }
    return load_language_model(view);
  }
  const MetaValue* value = file.find("general.architecture");
  if (value == nullptr || value->as_string() == nullptr) {
    fail(file.format_name(), ": ", file.display_name(),
         ": general.architecture is missing or not a string");
  }
  const std::string& arch = *value->as_string();
  for (const ArchEntry& entry : kArchitectures) {
    if (entry.name == arch) return entry.make(file);
  }
  std::string known;
  for (const ArchEntry& entry : kArchitectures) {
    known += (known.empty() ? "" : ", ") + std::string(entry.name);
  }
  fail(file.format_name(), ": ", file.display_name(), ": unknown architecture '", arch,
       "' (supported: ", known, ")");
}

}  // namespace sluice::model
