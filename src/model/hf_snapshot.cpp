// The translation of a Hugging Face snapshot: config.json → the "<arch>.*" keys that llama.cpp's
// convert_hf_to_gguf.py would write, and HF tensor names → GGUF names. What a family needs beyond
// that is one row of kFamilies and the settings it refuses; everything else (shapes, dtypes,
// missing tensors) is left to the architecture's WeightBinder, which checks it for GGUF too.
#include "model/hf_snapshot.h"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "format/hf/hf_config.h"

namespace sluice::model {
namespace {

using Json = nlohmann::json;

struct Family {
  std::string_view model_type;  // config.json's
  std::string_view arch;        // general.architecture
  bool gemma;                   // sandwich norms, (1 + w) norms, sliding layers
  std::string_view activation;  // the only hidden_act the architecture computes
  bool tied_default;            // tie_word_embeddings when config.json omits it
  double rope_theta_default;
};

constexpr Family kFamilies[] = {
    {"llama", "llama", false, "silu", false, 10000.0},
    {"qwen2", "qwen2", false, "silu", false, 10000.0},
    {"qwen3", "qwen3", false, "silu", false, 10000.0},
    {"gemma3_text", "gemma3", true, "gelu_pytorch_tanh", true, 1000000.0},
};

// One JSON object of config.json (the root, or gemma3's text_config), read with the key named on
// every refusal.
class Config {
 public:
  Config(const Json& json, std::string path, std::string prefix)
      : json_(json), path_(std::move(path)), prefix_(std::move(prefix)) {}

  template <class... Parts>
  [[noreturn]] void refuse(Parts&&... parts) const {
    fail("config: ", path_, ": ", std::forward<Parts>(parts)...);
  }
  std::string key(std::string_view name) const { return prefix_ + std::string(name); }

  // The value, or nullptr when absent or null (HF writes null for "not set").
  const Json* find(std::string_view name) const {
    auto it = json_.find(std::string(name));
    return it == json_.end() || it->is_null() ? nullptr : &*it;
  }
  int64_t integer(std::string_view name) const {
    const Json* value = find(name);
    if (value == nullptr) refuse("missing key (key: ", key(name), ")");
    if (!value->is_number_integer()) refuse("expected an integer (", key(name), ": ", *value, ")");
    return value->get<int64_t>();
  }
  int64_t integer(std::string_view name, int64_t fallback) const {
    return find(name) ? integer(name) : fallback;
  }
  double number(const Json& object, std::string_view name, std::string_view where) const {
    auto it = object.find(std::string(name));
    if (it == object.end() || !it->is_number() || !std::isfinite(it->get<double>())) {
      refuse("expected a number (", key(where), name, ")");
    }
    return it->get<double>();
  }
  double number(std::string_view name, double fallback) const {
    return find(name) ? number(json_, name, "") : fallback;
  }
  bool boolean(std::string_view name, bool fallback) const {
    const Json* value = find(name);
    if (value == nullptr) return fallback;
    if (!value->is_boolean()) refuse("expected a boolean (", key(name), ": ", *value, ")");
    return value->get<bool>();
  }
  std::string string(std::string_view name, std::string fallback) const {
    const Json* value = find(name);
    if (value == nullptr) return fallback;
    if (!value->is_string()) refuse("expected a string (", key(name), ": ", *value, ")");
    return value->get<std::string>();
  }

 private:
  const Json& json_;
  std::string path_;
  std::string prefix_;
};

struct Rope {
  double theta = 10000.0;
  double linear_factor = 1.0;  // 1: unscaled
};

// One RoPE parameter set: transformers 5's rope_parameters entry or the older rope_scaling
// object (with rope_theta beside it). Only the types llama.cpp's GGUF keys express are taken.
Rope parse_rope(const Config& config, const Json& params, std::string_view where,
                double theta_fallback) {
  Rope rope;
  rope.theta =
      params.contains("rope_theta") ? config.number(params, "rope_theta", where) : theta_fallback;
  std::string type = "default";
  for (const char* name : {"rope_type", "type"}) {
    if (params.contains(name) && params.at(name).is_string()) {
      type = params.at(name).get<std::string>();
      break;
    }
  }
  if (type == "linear") {
    rope.linear_factor = config.number(params, "factor", where);
    if (rope.linear_factor <= 0) config.refuse(config.key(where), "factor must be positive");
  } else if (type != "default") {
    config.refuse("RoPE type '", type, "' (", config.key(where),
                  ") is not supported for a Hugging Face snapshot (default and linear are)");
  }
  if (!(rope.theta > 0)) config.refuse(config.key(where), "rope_theta must be positive");
  if (params.contains("partial_rotary_factor") &&
      config.number(params, "partial_rotary_factor", where) != 1.0) {
    config.refuse(config.key(where), "partial_rotary_factor other than 1 is not supported");
  }
  return rope;
}

// The global and (gemma) sliding layers' RoPE, from either config generation.
std::pair<Rope, Rope> read_rope(const Config& config, const Family& family) {
  const double theta = config.number("rope_theta", family.rope_theta_default);
  const double local_theta = config.number("rope_local_base_freq", 10000.0);
  if (const Json* params = config.find("rope_parameters")) {
    if (!params->is_object()) config.refuse("rope_parameters is not an object");
    if (params->contains("full_attention")) {
      const Rope global = parse_rope(config, params->at("full_attention"),
                                     "rope_parameters.full_attention.", theta);
      const Rope local = params->contains("sliding_attention")
                             ? parse_rope(config, params->at("sliding_attention"),
                                          "rope_parameters.sliding_attention.", local_theta)
                             : Rope{local_theta, 1.0};
      return {global, local};
    }
    return {parse_rope(config, *params, "rope_parameters.", theta), Rope{local_theta, 1.0}};
  }
  Rope global{theta, 1.0};
  if (const Json* scaling = config.find("rope_scaling")) {
    if (!scaling->is_object()) config.refuse("rope_scaling is not an object");
    global = parse_rope(config, *scaling, "rope_scaling.", theta);
  }
  return {global, Rope{local_theta, 1.0}};
}

class Translator {
 public:
  Translator(const ModelFile& in, const Family& family, const Config& config, bool tied)
      : in_(in),
        out_(in.format(), in.display_name()),
        family_(family),
        config_(config),
        arch_(family.arch),
        tied_(tied) {}

  ModelFile run() {
    out_.add_metadata("general.architecture", MetaValue::string(arch_));
    if (family_.model_type == "llama") {
      out_.add_metadata(std::string(kHfRopeRotateHalf), MetaValue::scalar(true));
    }
    if (family_.gemma) out_.add_metadata(std::string(kHfNormPlusOne), MetaValue::scalar(true));
    hyper_parameters();
    tensors();
    return std::move(out_);
  }

 private:
  void put_u32(std::string_view key, int64_t value) {
    if (value < 0 || value > int64_t(UINT32_MAX)) {
      config_.refuse(arch_, ".", key, " would be ", value, ", outside 0..", UINT32_MAX);
    }
    out_.add_metadata(arch_ + "." + std::string(key), MetaValue::scalar(uint32_t(value)));
  }
  void put_f32(std::string_view key, double value) {
    out_.add_metadata(arch_ + "." + std::string(key), MetaValue::scalar(float(value)));
  }

  void hyper_parameters() {
    const Config& c = config_;
    const int64_t n_embd = c.integer("hidden_size");
    const int64_t n_layer = c.integer("num_hidden_layers");
    const int64_t n_head = c.integer("num_attention_heads");
    if (n_head <= 0 || n_layer <= 0) {
      c.refuse("num_attention_heads and num_hidden_layers must be positive");
    }
    const int64_t head_dim = c.integer("head_dim", n_embd / n_head);
    put_u32("vocab_size", c.integer("vocab_size"));
    put_u32("context_length", c.integer("max_position_embeddings", 4096));
    put_u32("embedding_length", n_embd);
    put_u32("block_count", n_layer);
    put_u32("feed_forward_length", c.integer("intermediate_size"));
    put_u32("attention.head_count", n_head);
    put_u32("attention.head_count_kv", c.integer("num_key_value_heads", n_head));
    put_u32("attention.key_length", head_dim);
    put_u32("attention.value_length", head_dim);
    put_f32("attention.layer_norm_rms_epsilon", c.number("rms_norm_eps", 1e-6));

    const std::string act = c.string(family_.gemma ? "hidden_activation" : "hidden_act",
                                     c.string("hidden_act", std::string(family_.activation)));
    if (act != family_.activation) {
      c.refuse("activation '", act, "' is not supported for ", family_.model_type, " (only ",
               family_.activation, ")");
    }
    if (c.boolean("mlp_bias", false)) c.refuse("mlp_bias is not supported");
    if (c.boolean("use_sliding_window", false)) c.refuse("use_sliding_window is not supported");

    if (c.number("partial_rotary_factor", 1.0) != 1.0) {
      c.refuse("partial_rotary_factor other than 1 is not supported");
    }
    const auto [global, local] = read_rope(c, family_);
    put_f32("rope.freq_base", global.theta);
    if (global.linear_factor != 1.0) {
      out_.add_metadata(arch_ + ".rope.scaling.type", MetaValue::string("linear"));
      put_f32("rope.scaling.factor", global.linear_factor);
    }
    if (family_.gemma) gemma_settings(n_embd, n_layer, n_head, head_dim, local);
  }

  // What arch/gemma3.cpp computes as llama.cpp does; a config asking for anything else is refused
  // rather than run differently from transformers.
  void gemma_settings(int64_t n_embd, int64_t n_layer, int64_t n_head, int64_t head_dim,
                      const Rope& local) {
    const Config& c = config_;
    for (const char* key : {"final_logit_softcapping", "attn_logit_softcapping"}) {
      if (c.find(key)) c.refuse(key, " is not supported for gemma3");
    }
    if (c.boolean("use_bidirectional_attention", false)) {
      c.refuse("use_bidirectional_attention is not supported");
    }
    if (local.theta != 10000.0 || local.linear_factor != 1.0) {
      c.refuse("gemma3 sliding layers must use RoPE base 10000 unscaled (found base ", local.theta,
               ", factor ", local.linear_factor, ")");
    }
    const double expected = n_layer == 62 ? double(n_embd / n_head) : double(head_dim);
    const double scalar = c.number("query_pre_attn_scalar", expected);
    if (scalar != expected) {
      c.refuse("query_pre_attn_scalar ", scalar, " is not supported (gemma3 with ", n_layer,
               " layers scales queries by 1/sqrt(", expected, "))");
    }
    const int64_t window = c.integer("sliding_window", 0);
    put_u32("attention.sliding_window", window);
    std::vector<bool> sliding(static_cast<size_t>(n_layer));
    if (const Json* types = c.find("layer_types")) {
      if (!types->is_array() || int64_t(types->size()) != n_layer) {
        c.refuse("layer_types must list ", n_layer, " layers");
      }
      for (int64_t il = 0; il < n_layer; ++il) {
        const Json& type = types->at(size_t(il));
        if (type == "sliding_attention") {
          sliding[size_t(il)] = true;
        } else if (type != "full_attention") {
          c.refuse("layer_types[", il, "]: unsupported layer type ", type);
        }
      }
    } else {
      const int64_t period = c.integer("sliding_window_pattern", 6);
      if (period <= 0) c.refuse("sliding_window_pattern must be positive");
      for (int64_t il = 0; il < n_layer; ++il) sliding[size_t(il)] = (il + 1) % period != 0;
    }
    out_.add_metadata(arch_ + ".attention.sliding_window_pattern", MetaValue::array(sliding));
  }

  // "model.layers.3.self_attn.q_proj.weight" → "blk.3.attn_q.weight"; "" drops the tensor;
  // nullopt: a tensor this translator cannot name.
  std::optional<std::string> gguf_name(std::string_view name) const {
    for (std::string_view prefix :
         {"model.language_model.", "language_model.model.", "language_model.", "model."}) {
      if (name.starts_with(prefix)) {
        name.remove_prefix(prefix.size());
        break;
      }
    }
    for (std::string_view drop : {"vision_tower.", "multi_modal_projector."}) {
      if (name.starts_with(drop)) return "";
    }
    if (name == "embed_tokens.weight") return "token_embd.weight";
    if (name == "norm.weight") return "output_norm.weight";
    if (name == "lm_head.weight") return "output.weight";
    if (!name.starts_with("layers.")) return std::nullopt;
    name.remove_prefix(7);
    const size_t dot = name.find('.');
    if (dot == std::string_view::npos || dot == 0) return std::nullopt;
    const std::string_view layer = name.substr(0, dot);
    if (layer.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
    const std::string_view rest = name.substr(dot + 1);
    if (rest.ends_with("rotary_emb.inv_freq")) return "";  // recomputed from rope_theta

    struct Rename {
      std::string_view hf, gguf;
    };
    static constexpr Rename kCommon[] = {
        {"input_layernorm.weight", "attn_norm.weight"},
        {"self_attn.q_proj.weight", "attn_q.weight"},
        {"self_attn.q_proj.bias", "attn_q.bias"},
        {"self_attn.k_proj.weight", "attn_k.weight"},
        {"self_attn.k_proj.bias", "attn_k.bias"},
        {"self_attn.v_proj.weight", "attn_v.weight"},
        {"self_attn.v_proj.bias", "attn_v.bias"},
        {"self_attn.o_proj.weight", "attn_output.weight"},
        {"self_attn.o_proj.bias", "attn_output.bias"},
        {"self_attn.q_norm.weight", "attn_q_norm.weight"},
        {"self_attn.k_norm.weight", "attn_k_norm.weight"},
        {"mlp.gate_proj.weight", "ffn_gate.weight"},
        {"mlp.up_proj.weight", "ffn_up.weight"},
        {"mlp.down_proj.weight", "ffn_down.weight"},
    };
    // The pre-norm families norm the FFN input with post_attention_layernorm; gemma's sandwich
    // uses it on the attention output and has pre/post_feedforward_layernorm for the FFN.
    static constexpr Rename kPreNorm[] = {{"post_attention_layernorm.weight", "ffn_norm.weight"}};
    static constexpr Rename kGemma[] = {
        {"post_attention_layernorm.weight", "post_attention_norm.weight"},
        {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
        {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
    };
    const std::string blk = "blk." + std::string(layer) + ".";
    for (const Rename& r : kCommon) {
      if (rest == r.hf) return blk + std::string(r.gguf);
    }
    if (family_.gemma) {
      for (const Rename& r : kGemma) {
        if (rest == r.hf) return blk + std::string(r.gguf);
      }
    } else {
      for (const Rename& r : kPreNorm) {
        if (rest == r.hf) return blk + std::string(r.gguf);
      }
    }
    return std::nullopt;
  }

  void tensors() {
    for (const SourceFile& source : in_.sources()) out_.add_source(source);
    std::string unknown;
    int n_unknown = 0;
    bool has_output = false;
    for (const TensorInfo& tensor : in_.tensors()) {
      std::optional<std::string> name = gguf_name(tensor.name);
      if (!name) {
        if (n_unknown++ < 5) unknown += (unknown.empty() ? "'" : ", '") + tensor.name + "'";
        continue;
      }
      // Tied: transformers reads the head from embed_tokens whatever lm_head holds.
      if (name->empty() || (tied_ && *name == "output.weight")) continue;
      has_output = has_output || *name == "output.weight";
      TensorInfo renamed = tensor;
      renamed.name = std::move(*name);
      out_.add_tensor(std::move(renamed));
    }
    if (n_unknown > 0) {
      fail(in_.format_name(), ": ", in_.display_name(), ": ", n_unknown, " tensor(s) that a ",
           family_.model_type, " snapshot should not have: ", unknown, n_unknown > 5 ? ", …" : "");
    }
    if (!tied_ && !has_output) {
      fail(in_.format_name(), ": ", in_.display_name(),
           ": lm_head.weight is missing and tie_word_embeddings is false");
    }
  }

  const ModelFile& in_;
  ModelFile out_;
  const Family& family_;
  const Config& config_;
  std::string arch_;
  bool tied_;
};

}  // namespace

bool is_hf_snapshot(const ModelFile& file) {
  return file.format() == FileFormat::safetensors && !file.contains("general.architecture");
}

ModelFile gguf_view_of_hf_snapshot(const ModelFile& file) {
  if (file.sources().empty()) fail("safetensors: ", file.display_name(), ": no files");
  const std::filesystem::path dir =
      std::filesystem::path(file.sources().front().path).parent_path();
  std::error_code error;
  if (!std::filesystem::is_regular_file(dir / "config.json", error)) {
    fail("safetensors: ", file.display_name(), ": no config.json beside it (",
         (dir / "config.json").string(), "), so its architecture is unknown");
  }
  const HfConfig hf = HfConfig::load(dir.string());
  const Config root(hf.json(), hf.path(), "");
  std::string model_type = root.string("model_type", "");
  const Json* text = &hf.json();
  std::string prefix;
  if (model_type == "gemma3") {  // the multimodal checkpoint: its text model alone
    text = root.find("text_config");
    if (text == nullptr || !text->is_object()) root.refuse("gemma3 without a text_config");
    model_type = "gemma3_text";
    prefix = "text_config.";
  }
  const Config config(*text, hf.path(), prefix);
  for (const Family& family : kFamilies) {
    if (family.model_type != model_type) continue;
    // gemma3's text_config may leave tying to the multimodal root.
    const bool tied = config.find("tie_word_embeddings")
                          ? config.boolean("tie_word_embeddings", true)
                          : root.boolean("tie_word_embeddings", family.tied_default);
    return Translator(file, family, config, tied).run();
  }
  std::string known;
  for (const Family& family : kFamilies) {
    known += (known.empty() ? "" : ", ") + std::string(family.model_type);
  }
  root.refuse("model_type '", model_type, "' is not supported (supported: ", known, ", gemma3)");
}

}  // namespace sluice::model
