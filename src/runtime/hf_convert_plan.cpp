// The dense families' plan: model/hf_snapshot.cpp already names every tensor and key as
// llama.cpp's convert_hf_to_gguf.py does and refuses what the architectures cannot honour; this
// turns its sluice.hf.* markers into the numbers llama.cpp expects (llama's Q/K rows permuted for
// adjacent-pair RoPE, gemma's norms stored as 1 + w) and decides which tensors stay F32.
#include <filesystem>
#include <string_view>

#include "core/error.h"
#include "format/hf/hf_config.h"
#include "model/hf_snapshot.h"
#include "runtime/hf_convert_plan.h"

namespace sluice::convert {
namespace {

// config.json model_type → handled here (true) or by plan_qwen3moe (false).
struct KnownType {
  std::string_view model_type;
  bool dense;
};
constexpr KnownType kKnownTypes[] = {
    {"llama", true},  {"qwen2", true},       {"qwen3", true},
    {"gemma3", true}, {"gemma3_text", true}, {"qwen3_moe", false},
};

std::vector<uint64_t> shape_of(const TensorInfo& tensor) {
  return {tensor.ne.begin(), tensor.ne.begin() + tensor.n_dims};
}

// llama.cpp's prepare_tensors: 1-D tensors and norms stay F32.
TensorRole role_of(const TensorInfo& tensor) {
  const std::string_view name = tensor.name;
  return tensor.n_dims <= 1 || name.ends_with("_norm.weight") ? TensorRole::kKeepF32
                                                              : TensorRole::kMatrix;
}

}  // namespace

Plan plan_model(const ModelFile& snapshot, const std::string& hf_dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::path config_path = fs::path(hf_dir) / "config.json";
  if (!fs::is_regular_file(config_path, error)) {
    fail("convert: ", hf_dir, ": no config.json, so the architecture is unknown");
  }
  const HfConfig config = HfConfig::load(hf_dir);
  const std::string model_type =
      config.contains("model_type") ? config.get_string("model_type") : std::string();
  const KnownType* known = nullptr;
  std::string names;
  for (const KnownType& type : kKnownTypes) {
    if (type.model_type == model_type) known = &type;
    names += (names.empty() ? "" : ", ") + std::string(type.model_type);
  }
  if (known == nullptr) {
    fail("config: ", config.path(), ": model_type '", model_type,
         "' cannot be converted (supported: ", names, ")");
  }
  if (!known->dense) return plan_qwen3moe(snapshot, hf_dir);

  const ModelFile view = model::gguf_view_of_hf_snapshot(snapshot);
  Plan plan;
  plan.arch = view.get_string("general.architecture");
  const bool rotate_half = view.contains(model::kHfRopeRotateHalf);
  const bool plus_one = view.contains(model::kHfNormPlusOne);
  for (const MetaEntry& entry : view.metadata()) {
    if (!entry.key.starts_with("sluice.")) plan.metadata.push_back(entry);
  }
  const std::string prefix = plan.arch + ".";
  if (rotate_half) {  // llama.cpp's LlamaModel writes the rotated width explicitly
    plan.metadata.push_back({prefix + "rope.dimension_count",
                             MetaValue::scalar(view.get_u32(prefix + "attention.key_length"))});
  }
  const uint32_t n_head = view.get_u32(prefix + "attention.head_count");
  const uint32_t n_head_kv = view.get_u32(prefix + "attention.head_count_kv");
  for (const TensorInfo& tensor : view.tensors()) {
    PlannedTensor planned;
    planned.name = tensor.name;
    planned.ne = shape_of(tensor);
    planned.rows = {RowRange{tensor, 0, tensor.n_dims <= 1 ? 1 : tensor.n_rows()}};
    planned.role = role_of(tensor);
    const std::string_view name = tensor.name;
    if (rotate_half && (name.ends_with(".attn_q.weight") || name.ends_with(".attn_q.bias"))) {
      planned.permute_heads = n_head;
    } else if (rotate_half &&
               (name.ends_with(".attn_k.weight") || name.ends_with(".attn_k.bias"))) {
      planned.permute_heads = n_head_kv;
    }
    planned.add_one = plus_one && name.ends_with("norm.weight");
    if (name == "token_embd.weight") plan.n_vocab = int64_t(tensor.ne[1]);
    plan.tensors.push_back(std::move(planned));
  }
  if (plan.n_vocab == 0) fail("convert: ", hf_dir, ": no embed_tokens.weight tensor");
  if (const MetaValue* factors = view.find(model::kHfRopeFreqFactors)) {
    PlannedTensor rope_freqs;  // as llama.cpp's LlamaModel writes Llama 3.1's scaling
    rope_freqs.name = "rope_freqs.weight";
    rope_freqs.values = factors->array_as<float>().value_or(std::vector<float>{});
    rope_freqs.ne = {rope_freqs.values.size()};
    rope_freqs.role = TensorRole::kKeepF32;
    plan.tensors.push_back(std::move(rope_freqs));
  }
  return plan;
}

}  // namespace sluice::convert
