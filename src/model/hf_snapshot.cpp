// The translation of a Hugging Face snapshot: config.json → the "<arch>.*" keys that llama.cpp's
// convert_hf_to_gguf.py would write, and HF tensor names → GGUF names. What a family needs beyond
// that is one row of kFamilies and the settings it refuses; everything else (shapes, dtypes,
// missing tensors) is left to the architecture's WeightBinder, which checks it for GGUF too.
// Routed experts keep one tensor per expert ("blk.N.ffn_gate.E.weight", which the binder stacks):
// transformers 5's fused gate_up_proj is cut into such halves, deepseek's kv_b_proj per head.
#include "model/hf_snapshot.h"

#include <charconv>
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

// How a MoE family's config.json names its experts' settings.
enum class Moe {
  kNone,
  kQwen3,     // moe_intermediate_size, norm_topk_prob (default false)
  kMixtral,   // intermediate_size; the chosen weights always renormalised
  kOlmoe,     // intermediate_size, norm_topk_prob (default false)
  kGlm,       // n_routed_experts, moe_intermediate_size, norm_topk_prob (default true); sigmoid
              // routing with groups, shared experts, leading dense layers
  kDeepseek,  // as kGlm, with multi-head latent attention
};

struct Family {
  std::string_view model_type;  // config.json's
  std::string_view arch;        // general.architecture
  bool gemma;                   // sandwich norms, (1 + w) norms, sliding layers
  std::string_view activation;  // the only hidden_act the architecture computes
  bool tied_default;            // tie_word_embeddings when config.json omits it
  double rope_theta_default;
  Moe moe = Moe::kNone;
};

constexpr Family kFamilies[] = {
    {"llama", "llama", false, "silu", false, 10000.0},
    {"qwen2", "qwen2", false, "silu", false, 10000.0},
    {"qwen3", "qwen3", false, "silu", false, 10000.0},
    {"gemma3_text", "gemma3", true, "gelu_pytorch_tanh", true, 1000000.0},
    {"qwen3_moe", "qwen3moe", false, "silu", false, 10000.0, Moe::kQwen3},
    {"mixtral", "llama", false, "silu", false, 1000000.0, Moe::kMixtral},
    {"olmoe", "olmoe", false, "silu", false, 10000.0, Moe::kOlmoe},
    {"glm4_moe", "glm4moe", false, "silu", false, 10000.0, Moe::kGlm},
    {"deepseek_v3", "deepseek2", false, "silu", false, 10000.0, Moe::kDeepseek},
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

// Llama 3.1's "llama3" scaling: long wavelengths slowed by `factor`, short ones kept, a smooth
// ramp between (wavelengths measured against original_max_position_embeddings).
struct Llama3Scaling {
  double factor = 1.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_context = 8192.0;
};

struct Rope {
  double theta = 10000.0;
  double linear_factor = 1.0;            // 1: unscaled
  std::optional<double> partial_factor;  // the share of each head rotated, when given here
  std::optional<Llama3Scaling> llama3 = std::nullopt;
};

// The per-dimension-pair divisors of llama3 scaling, as llama.cpp's converter computes them for
// its rope_freqs.weight tensor (ggml's RoPE divides each pair's angle by its factor), from the
// unscaled inverse frequencies theta^(-2i/n_rot) rounded to float32 as torch holds them.
std::vector<float> llama3_freq_factors(const Llama3Scaling& s, double theta, int64_t n_rot) {
  const double low_wavelen = s.original_context / s.low_freq_factor;
  const double high_wavelen = s.original_context / s.high_freq_factor;
  std::vector<float> factors;
  for (int64_t i = 0; i < n_rot; i += 2) {
    const float freq = float(1.0 / std::pow(theta, double(i) / double(n_rot)));
    const double wavelen = 2.0 * M_PI / double(freq);
    if (wavelen < high_wavelen) {
      factors.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      factors.push_back(float(s.factor));
    } else {
      const double smooth = (s.original_context / wavelen - s.low_freq_factor) /
                            (s.high_freq_factor - s.low_freq_factor);
      factors.push_back(float(1.0 / ((1.0 - smooth) / s.factor + smooth)));
    }
  }
  return factors;
}

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
  } else if (type == "llama3") {
    Llama3Scaling s;
    s.factor = config.number(params, "factor", where);
    s.low_freq_factor = config.number(params, "low_freq_factor", where);
    s.high_freq_factor = config.number(params, "high_freq_factor", where);
    s.original_context = config.number(params, "original_max_position_embeddings", where);
    if (!(s.factor > 0) || !(s.low_freq_factor > 0) || !(s.original_context > 0) ||
        !(s.high_freq_factor > s.low_freq_factor)) {
      config.refuse(config.key(where),
                    "llama3 scaling needs factor, low_freq_factor < high_freq_factor and "
                    "original_max_position_embeddings, all positive");
    }
    rope.llama3 = s;
  } else if (type != "default") {
    config.refuse("RoPE type '", type, "' (", config.key(where),
                  ") is not supported for a Hugging Face snapshot (default, linear and llama3 "
                  "are)");
  }
  if (!(rope.theta > 0)) config.refuse(config.key(where), "rope_theta must be positive");
  if (params.contains("partial_rotary_factor")) {
    rope.partial_factor = config.number(params, "partial_rotary_factor", where);
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
                             : Rope{local_theta, 1.0, std::nullopt, std::nullopt};
      return {global, local};
    }
    return {parse_rope(config, *params, "rope_parameters.", theta),
            Rope{local_theta, 1.0, std::nullopt, std::nullopt}};
  }
  Rope global{theta, 1.0, std::nullopt, std::nullopt};
  if (const Json* scaling = config.find("rope_scaling")) {
    if (!scaling->is_object()) config.refuse("rope_scaling is not an object");
    global = parse_rope(config, *scaling, "rope_scaling.", theta);
  }
  return {global, Rope{local_theta, 1.0, std::nullopt, std::nullopt}};
}

struct Rename {
  std::string_view hf, gguf;
};

// The standard attention of a layer: the input norm and q/k/v/o projections with their biases.
constexpr Rename kAttention[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.o_proj.bias", "attn_output.bias"},
};

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
    if (family_.arch == "llama") {  // llama and mixtral
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
    n_layer_ = n_layer;
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
    if (family_.moe == Moe::kDeepseek) {
      mla_settings();
    } else {
      put_u32("attention.head_count_kv", c.integer("num_key_value_heads", n_head));
      put_u32("attention.key_length", head_dim);
      put_u32("attention.value_length", head_dim);
    }
    put_f32("attention.layer_norm_rms_epsilon", c.number("rms_norm_eps", 1e-6));

    const std::string act = c.string(family_.gemma ? "hidden_activation" : "hidden_act",
                                     c.string("hidden_act", std::string(family_.activation)));
    if (act != family_.activation) {
      c.refuse("activation '", act, "' is not supported for ", family_.model_type, " (only ",
               family_.activation, ")");
    }
    if (c.boolean("mlp_bias", false)) c.refuse("mlp_bias is not supported");
    if (c.boolean("use_sliding_window", false)) c.refuse("use_sliding_window is not supported");

    const auto [global, local] = read_rope(c, family_);
    // Glm4MoeConfig's default is 0.5.
    const double partial = global.partial_factor.value_or(
        c.number("partial_rotary_factor", family_.moe == Moe::kGlm ? 0.5 : 1.0));
    if (partial != 1.0 || local.partial_factor.value_or(1.0) != 1.0) {
      // glm4_moe rotates the first head_dim * factor dimensions of each head (rotate_half
      // within them), which rope.dimension_count with NeoX RoPE computes.
      const double n_rot = double(head_dim) * partial;
      if (family_.moe != Moe::kGlm || !(n_rot > 0) || n_rot != std::floor(n_rot) ||
          int64_t(n_rot) % 2 != 0 || local.partial_factor.value_or(1.0) != 1.0) {
        c.refuse("partial_rotary_factor ", partial, " is not supported for ", family_.model_type);
      }
      put_u32("rope.dimension_count", int64_t(n_rot));
    }
    put_f32("rope.freq_base", global.theta);
    if (global.linear_factor != 1.0) {
      out_.add_metadata(arch_ + ".rope.scaling.type", MetaValue::string("linear"));
      put_f32("rope.scaling.factor", global.linear_factor);
    }
    if (global.llama3) {
      if (family_.arch != "llama" || partial != 1.0) {
        c.refuse("llama3 RoPE scaling is supported for llama models only");
      }
      out_.add_metadata(
          std::string(kHfRopeFreqFactors),
          MetaValue::array(llama3_freq_factors(*global.llama3, global.theta, head_dim)));
    }
    if (family_.gemma) gemma_settings(n_embd, n_layer, n_head, head_dim, local);
    if (family_.moe != Moe::kNone) moe_settings(n_layer);
  }

  // The router and experts: what llama.cpp's converters write for these families. Layers without
  // experts, and anything transformers would compute that the architecture does not, are refused.
  void moe_settings(int64_t n_layer) {
    const Config& c = config_;
    const bool mixtral = family_.moe == Moe::kMixtral;
    // The Hub's qwen3_moe configs say num_experts; transformers 5 saves num_local_experts.
    const bool deepseek_moe = family_.moe == Moe::kGlm || family_.moe == Moe::kDeepseek;
    const char* count_key = deepseek_moe            ? "n_routed_experts"
                            : c.find("num_experts") ? "num_experts"
                                                    : "num_local_experts";
    const char* ff_key =
        family_.moe == Moe::kQwen3 || deepseek_moe ? "moe_intermediate_size" : "intermediate_size";
    const int64_t n_expert = c.integer(count_key);
    const int64_t n_used = c.integer("num_experts_per_tok");
    if (n_expert <= 0 || n_used <= 0 || n_used > n_expert) {
      c.refuse("num_experts_per_tok must be 1..", count_key, " (", n_used, " of ", n_expert, ")");
    }
    put_u32("expert_count", n_expert);
    put_u32("expert_used_count", n_used);
    put_u32("expert_feed_forward_length", c.integer(ff_key));
    // transformers' defaults: Glm4MoeConfig renormalises, Qwen3MoeConfig and OlmoeConfig do not.
    const bool norm = mixtral || c.boolean("norm_topk_prob", deepseek_moe);
    out_.add_metadata(arch_ + ".expert_weights_norm", MetaValue::scalar(norm));
    if (family_.moe == Moe::kQwen3) {
      const int64_t step = c.integer("decoder_sparse_step", 1);
      const Json* dense = c.find("mlp_only_layers");
      if (step != 1 || (dense != nullptr && !(dense->is_array() && dense->empty()))) {
        c.refuse("qwen3_moe layers without experts (decoder_sparse_step ", step,
                 ", mlp_only_layers) are not supported; every one of the ", n_layer,
                 " layers must be MoE");
      }
    }
    if (mixtral && c.find("sliding_window")) {
      c.refuse("sliding_window is not supported for mixtral");
    }
    if (family_.moe == Moe::kOlmoe && c.find("clip_qkv")) {
      c.refuse("clip_qkv is not supported for olmoe");
    }
    if (deepseek_moe) deepseek_moe_settings(n_layer, n_expert, n_used);
  }

  // transformers' Glm4MoeMoE and DeepseekV3MoE: sigmoid scores; the choice by score +
  // e_score_correction_bias among the topk_group of n_group groups (ranked by their best two);
  // the chosen scores renormalised (norm_topk_prob) and times routed_scaling_factor; plus shared
  // experts of n_shared_experts * moe_intermediate_size, after first_k_dense_replace dense
  // layers. The defaults are each config class's.
  void deepseek_moe_settings(int64_t n_layer, int64_t n_expert, int64_t n_used) {
    const Config& c = config_;
    const bool v3 = family_.moe == Moe::kDeepseek;
    out_.add_metadata(arch_ + ".expert_gating_func", MetaValue::scalar(uint32_t(2)));
    put_u32("expert_shared_count", c.integer("n_shared_experts", 1));
    const int64_t n_dense = c.integer("first_k_dense_replace", v3 ? 3 : 1);
    if (n_dense < 0 || n_dense > n_layer) c.refuse("first_k_dense_replace must be 0..", n_layer);
    put_u32("leading_dense_block_count", n_dense);
    put_f32("expert_weights_scale", c.number("routed_scaling_factor", v3 ? 2.5 : 1.0));
    const int64_t n_group = c.integer("n_group", v3 ? 8 : 1);
    const int64_t n_group_used = c.integer("topk_group", v3 ? 4 : 1);
    if (n_group <= 0 || n_expert % n_group != 0 || n_group_used <= 0 || n_group_used > n_group ||
        n_used > n_group_used * (n_expert / n_group) || (n_group > 1 && n_expert / n_group < 2)) {
      c.refuse("n_group ", n_group, " / topk_group ", n_group_used, " do not fit ", n_expert,
               " experts choosing ", n_used);
    }
    put_u32("expert_group_count", n_group);
    put_u32("expert_group_used_count", n_group_used);
  }

  // DeepSeek V3's multi-head latent attention in llama.cpp's MLA form: one cached "head" of the
  // kv_lora_rank latent plus the rotary part, per-head sizes in key/value_length_mla. RoPE on
  // adjacent pairs (transformers' rope_interleave) is what arch/deepseek2.cpp computes.
  void mla_settings() {
    const Config& c = config_;
    const int64_t kv_rank = c.integer("kv_lora_rank");
    const int64_t rope = c.integer("qk_rope_head_dim");
    const int64_t nope = c.integer("qk_nope_head_dim");
    put_u32("attention.head_count_kv", 1);
    put_u32("attention.key_length", kv_rank + rope);
    put_u32("attention.value_length", kv_rank);
    put_u32("attention.key_length_mla", nope + rope);
    put_u32("attention.value_length_mla", c.integer("v_head_dim"));
    put_u32("attention.q_lora_rank", c.integer("q_lora_rank", 0));
    put_u32("attention.kv_lora_rank", kv_rank);
    put_u32("rope.dimension_count", rope);
    if (!c.boolean("rope_interleave", true)) c.refuse("rope_interleave false is not supported");
    if (c.boolean("attention_bias", false)) c.refuse("attention_bias is not supported");
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
    const double expected = double(n_layer == 62 ? n_embd / n_head : head_dim);
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
    if (rest.ends_with("weight_scale_inv")) return "";     // FP8 block scales: convert's

    static constexpr Rename kCommon[] = {
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
    // glm4_moe snapshots carry the NextN (multi-token prediction) layers after the decoder's,
    // which transformers does not load (_keys_to_ignore_on_load_unexpected): neither do we.
    if (family_.moe == Moe::kGlm || family_.moe == Moe::kDeepseek) {
      int64_t index = 0;
      const auto [end, error] = std::from_chars(layer.data(), layer.data() + layer.size(), index);
      if (error != std::errc() || index >= n_layer_) return "";
    }
    if (family_.moe != Moe::kNone) return moe_name(blk, rest);
    if (const auto name = hf_attention_tensor(rest)) return blk + std::string(*name);
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

  // A MoE layer's tensor: its attention as the dense families', the FFN norm, the router, and the
  // experts — per expert ("mlp.experts.3.up_proj.weight" → "ffn_up.3.weight"; mixtral's
  // block_sparse_moe.experts.3.w1/w3/w2 are gate/up/down) or fused as transformers 5 holds them
  // (down_proj is already the GGUF stack; gate_up_proj is cut by split_gate_up).
  std::optional<std::string> moe_name(const std::string& blk, std::string_view rest) const {
    static constexpr Rename kMoe[] = {
        {"input_layernorm.weight", "attn_norm.weight"},
        {"self_attn.q_proj.weight", "attn_q.weight"},
        {"self_attn.k_proj.weight", "attn_k.weight"},
        {"self_attn.v_proj.weight", "attn_v.weight"},
        {"self_attn.o_proj.weight", "attn_output.weight"},
        {"self_attn.q_norm.weight", "attn_q_norm.weight"},
        {"self_attn.k_norm.weight", "attn_k_norm.weight"},
        {"mlp.gate.weight", "ffn_gate_inp.weight"},
        {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"},
        {"mlp.experts.gate_up_proj", "ffn_gate_up_exps.weight"},
        {"mlp.experts.down_proj", "ffn_down_exps.weight"},
    };
    for (const Rename& r : kMoe) {
      if (rest == r.hf) return blk + std::string(r.gguf);
    }
    if (rest == "post_attention_layernorm.weight") {  // glm4moe's FFN norm has llama.cpp's name
      return blk + (family_.moe == Moe::kGlm ? "post_attention_norm.weight" : "ffn_norm.weight");
    }
    if (family_.moe == Moe::kDeepseek) {
      static constexpr Rename kMla[] = {
          {"self_attn.q_a_proj.weight", "attn_q_a.weight"},
          {"self_attn.q_a_layernorm.weight", "attn_q_a_norm.weight"},
          {"self_attn.q_b_proj.weight", "attn_q_b.weight"},
          {"self_attn.kv_a_proj_with_mqa.weight", "attn_kv_a_mqa.weight"},
          {"self_attn.kv_a_layernorm.weight", "attn_kv_a_norm.weight"},
          {"self_attn.kv_b_proj.weight", "attn_kv_b_hf.weight"},  // cut by split_kv_b
      };
      for (const Rename& r : kMla) {
        if (rest == r.hf) return blk + std::string(r.gguf);
      }
    }
    if (family_.moe == Moe::kGlm ||
        family_.moe == Moe::kDeepseek) {  // Q/K/V biases, dense lead layers, the selection bias and
      // shared experts
      static constexpr Rename kGlm[] = {
          {"self_attn.q_proj.bias", "attn_q.bias"},
          {"self_attn.k_proj.bias", "attn_k.bias"},
          {"self_attn.v_proj.bias", "attn_v.bias"},
          {"mlp.gate_proj.weight", "ffn_gate.weight"},
          {"mlp.up_proj.weight", "ffn_up.weight"},
          {"mlp.down_proj.weight", "ffn_down.weight"},
          {"mlp.gate.e_score_correction_bias", "exp_probs_b.bias"},
          {"mlp.shared_experts.gate_proj.weight", "ffn_gate_shexp.weight"},
          {"mlp.shared_experts.up_proj.weight", "ffn_up_shexp.weight"},
          {"mlp.shared_experts.down_proj.weight", "ffn_down_shexp.weight"},
      };
      for (const Rename& r : kGlm) {
        if (rest == r.hf) return blk + std::string(r.gguf);
      }
    }
    static constexpr Rename kExpert[] = {
        {"gate_proj.weight", "ffn_gate"}, {"up_proj.weight", "ffn_up"},
        {"down_proj.weight", "ffn_down"}, {"w1.weight", "ffn_gate"},
        {"w3.weight", "ffn_up"},          {"w2.weight", "ffn_down"},
    };
    for (std::string_view experts : {"mlp.experts.", "block_sparse_moe.experts."}) {
      if (!rest.starts_with(experts)) continue;
      std::string_view tail = rest.substr(experts.size());
      const size_t dot = tail.find('.');
      const std::string_view expert = tail.substr(0, dot);
      if (dot == std::string_view::npos || expert.empty() ||
          expert.find_first_not_of("0123456789") != std::string_view::npos) {
        return std::nullopt;
      }
      // Mixtral names its experts w1/w2/w3, the others gate_proj/up_proj/down_proj.
      const bool mixtral_names = experts.starts_with("block");
      for (size_t i = mixtral_names ? 3 : 0; i < (mixtral_names ? 6 : 3); ++i) {
        if (tail.substr(dot + 1) == kExpert[i].hf) {
          return blk + std::string(kExpert[i].gguf) + "." + std::string(expert) + ".weight";
        }
      }
    }
    return std::nullopt;
  }

  // transformers 5's mlp.experts.gate_up_proj [n_expert, 2 n_ff, n_embd]: each expert's gate rows
  // then its up rows, so each half is one contiguous [n_embd, n_ff] matrix per expert.
  void split_gate_up(const TensorInfo& fused, const std::string& blk) {
    const uint64_t n_expert = fused.ne[2];
    if (fused.n_dims != 3 || fused.ne[1] % 2 != 0 || n_expert == 0 ||
        fused.n_bytes % (2 * n_expert) != 0) {
      fail(in_.format_name(), ": ", in_.display_name(), ": tensor '", fused.name,
           "' is not [n_expert, 2 * n_ff, n_embd]");
    }
    const uint64_t half = fused.n_bytes / n_expert / 2;
    static constexpr const char* kHalves[] = {"ffn_gate.", "ffn_up."};
    for (uint64_t e = 0; e < n_expert; ++e) {
      for (uint64_t h = 0; h < 2; ++h) {
        TensorInfo piece = fused;
        piece.name = blk + kHalves[h] + std::to_string(e) + ".weight";
        piece.n_dims = 2;
        piece.ne = {fused.ne[0], fused.ne[1] / 2, 1, 1};
        piece.n_elements = fused.ne[0] * (fused.ne[1] / 2);
        piece.n_bytes = half;
        piece.offset = fused.offset + (2 * e + h) * half;
        out_.add_tensor(std::move(piece));
      }
    }
  }

  // kv_b_proj [n_head * (nope + v), kv_lora_rank]: per head, nope rows of K then v rows of V.
  // Each head's V rows are llama.cpp's attn_v_b matrix ("blk.N.attn_v_b.H.weight"); its K rows
  // are attn_k_b transposed ("blk.N.attn_k_b_t.H.weight"), which blocks/mla_attention.cpp
  // transposes at load — the one copy a snapshot's bytes need.
  void split_kv_b(const TensorInfo& kv_b, const std::string& blk) {
    const Config& c = config_;
    const uint64_t nope = uint64_t(c.integer("qk_nope_head_dim"));
    const uint64_t v = uint64_t(c.integer("v_head_dim"));
    const uint64_t rank = kv_b.ne[0];
    if (kv_b.n_dims != 2 || kv_b.n_elements == 0 || nope + v == 0 || kv_b.ne[1] % (nope + v) != 0 ||
        kv_b.n_bytes % kv_b.n_elements != 0) {
      fail(in_.format_name(), ": ", in_.display_name(), ": tensor '", kv_b.name,
           "' is not [n_head * (qk_nope_head_dim + v_head_dim), kv_lora_rank] of a float type");
    }
    const uint64_t element = kv_b.n_bytes / kv_b.n_elements;
    for (uint64_t h = 0; h < kv_b.ne[1] / (nope + v); ++h) {
      const uint64_t head = kv_b.offset + h * (nope + v) * rank * element;
      const uint64_t rows[] = {nope, v};
      const uint64_t offsets[] = {head, head + nope * rank * element};
      static constexpr const char* kParts[] = {"attn_k_b_t.", "attn_v_b."};
      for (size_t i = 0; i < 2; ++i) {
        TensorInfo piece = kv_b;
        piece.name = blk + kParts[i] + std::to_string(h) + ".weight";
        piece.ne = {rank, rows[i], 1, 1};
        piece.n_elements = rank * rows[i];
        piece.n_bytes = rank * rows[i] * element;
        piece.offset = offsets[i];
        out_.add_tensor(std::move(piece));
      }
    }
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
      if (name->ends_with("ffn_gate_up_exps.weight")) {
        split_gate_up(tensor, name->substr(0, name->size() - 23));
        continue;
      }
      if (name->ends_with("attn_kv_b_hf.weight")) {
        split_kv_b(tensor, name->substr(0, name->size() - 19));
        continue;
      }
      fp8_ = fp8_ || tensor.type == QType::F8_E4M3;
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
    if (fp8_) out_.add_metadata(std::string(kHfFp8BlockScaled), MetaValue::scalar(true));
  }

  const ModelFile& in_;
  ModelFile out_;
  const Family& family_;
  const Config& config_;
  std::string arch_;
  bool tied_;
  bool fp8_ = false;  // some weights are F8_E4M3 (with block scales)
  int64_t n_layer_ = 0;
};

}  // namespace

std::optional<std::string_view> hf_attention_tensor(std::string_view rest) {
  for (const Rename& r : kAttention) {
    if (rest == r.hf) return r.gguf;
  }
  return std::nullopt;
}

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
  if (model_type == "gpt_oss") {  // runtime/hf_convert_gpt_oss.h converts it
    fail("safetensors: ", file.display_name(),
         ": a gpt_oss snapshot runs after conversion (its experts are stored transposed with gate "
         "and up interleaved, or as MXFP4 blocks, which cannot be read in place): sluice convert ",
         dir.string(), " -o MODEL.gguf");
  }
  std::string known;
  for (const Family& family : kFamilies) {
    known += (known.empty() ? "" : ", ") + std::string(family.model_type);
  }
  root.refuse("model_type '", model_type, "' is not supported (supported: ", known, ", gemma3)");
}

}  // namespace sluice::model
