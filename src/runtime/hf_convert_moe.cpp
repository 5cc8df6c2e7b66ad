// qwen3moe's plan (Qwen3MoeForCausalLM): model/hf_snapshot.cpp has no MoE family, so this names
// its keys and tensors as llama.cpp's Qwen2MoeModel converter does — the router mlp.gate becomes
// ffn_gate_inp (kept F32), and the experts, stored per expert (mlp.experts.N.*_proj) or fused
// as transformers 5 saves them (mlp.experts.gate_up_proj [n_expert, 2 n_ff_exp, n_embd],
// mlp.experts.down_proj [n_expert, n_embd, n_ff_exp]), are stacked into ffn_*_exps.
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "core/error.h"
#include "format/hf/hf_config.h"
#include "runtime/hf_convert_fp8.h"
#include "runtime/hf_convert_plan.h"

namespace sluice::convert {
namespace {

using Json = nlohmann::json;

class Reader {
 public:
  explicit Reader(const HfConfig& config) : config_(config) {}
  template <class... Parts>
  [[noreturn]] void refuse(Parts&&... parts) const {
    fail("config: ", config_.path(), ": ", std::forward<Parts>(parts)...);
  }
  const Json* find(std::string_view key) const {
    auto it = config_.json().find(std::string(key));
    return it == config_.json().end() || it->is_null() ? nullptr : &*it;
  }
  int64_t integer(std::string_view key) const {
    const Json* value = find(key);
    if (value == nullptr) refuse("missing key (key: ", key, ")");
    if (!value->is_number_integer()) refuse("expected an integer (", key, ": ", *value, ")");
    return value->get<int64_t>();
  }
  int64_t integer(std::string_view key, int64_t fallback) const {
    return find(key) ? integer(key) : fallback;
  }
  double number(std::string_view key, double fallback) const {
    const Json* value = find(key);
    if (value == nullptr) return fallback;
    if (!value->is_number()) refuse("expected a number (", key, ": ", *value, ")");
    return value->get<double>();
  }
  bool boolean(std::string_view key, bool fallback) const {
    const Json* value = find(key);
    if (value == nullptr) return fallback;
    if (!value->is_boolean()) refuse("expected a boolean (", key, ": ", *value, ")");
    return value->get<bool>();
  }

 private:
  const HfConfig& config_;
};

struct Geometry {
  int64_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0;
  bool tied = false;
};

// What arch/qwen3moe.cpp computes, as llama.cpp does; anything else is refused by key.
void refuse_unsupported(const Reader& c) {
  if (c.find("rope_scaling")) c.refuse("rope_scaling is not supported for qwen3_moe");
  if (const Json* params = c.find("rope_parameters")) {
    const std::string type = params->value("rope_type", std::string("default"));
    if (type != "default") c.refuse("rope_parameters.rope_type '", type, "' is not supported");
  }
  if (!c.boolean("norm_topk_prob", true)) {
    c.refuse("norm_topk_prob false is not supported (llama.cpp's qwen3moe renormalises)");
  }
  if (c.integer("decoder_sparse_step", 1) != 1) c.refuse("decoder_sparse_step other than 1");
  if (const Json* dense = c.find("mlp_only_layers"); dense && !dense->empty()) {
    c.refuse("mlp_only_layers (dense layers in a qwen3_moe) are not supported");
  }
  if (c.boolean("use_sliding_window", false)) c.refuse("use_sliding_window is not supported");
  if (c.boolean("attention_bias", false)) c.refuse("attention_bias is not supported");
  if (const Json* act = c.find("hidden_act"); act && *act != "silu") {
    c.refuse("hidden_act ", *act, " is not supported (only silu)");
  }
}

Geometry hyper_parameters(const Reader& c, Plan& plan) {
  refuse_unsupported(c);
  Geometry g;
  g.n_embd = c.integer("hidden_size");
  g.n_layer = c.integer("num_hidden_layers");
  g.n_head = c.integer("num_attention_heads");
  if (g.n_head <= 0 || g.n_layer <= 0) c.refuse("num_attention_heads, num_hidden_layers");
  g.n_head_kv = c.integer("num_key_value_heads", g.n_head);
  g.head_dim = c.integer("head_dim", g.n_embd / g.n_head);
  g.n_expert = c.integer("num_experts");
  g.n_expert_used = c.integer("num_experts_per_tok");
  g.n_ff_exp = c.integer("moe_intermediate_size");
  g.tied = c.boolean("tie_word_embeddings", false);
  double theta = c.number("rope_theta", 10000.0);
  if (const Json* params = c.find("rope_parameters"); params && params->contains("rope_theta")) {
    theta = params->at("rope_theta").get<double>();
  }
  auto put = [&](std::string_view key, int64_t value) {
    if (value < 0 || value > int64_t(UINT32_MAX)) c.refuse(key, " out of range: ", value);
    plan.metadata.push_back({"qwen3moe." + std::string(key), MetaValue::scalar(uint32_t(value))});
  };
  plan.metadata.push_back({"general.architecture", MetaValue::string("qwen3moe")});
  put("vocab_size", c.integer("vocab_size"));
  put("context_length", c.integer("max_position_embeddings", 4096));
  put("embedding_length", g.n_embd);
  put("block_count", g.n_layer);
  put("feed_forward_length", c.integer("intermediate_size", g.n_ff_exp));
  put("attention.head_count", g.n_head);
  put("attention.head_count_kv", g.n_head_kv);
  plan.metadata.push_back({"qwen3moe.rope.freq_base", MetaValue::scalar(float(theta))});
  plan.metadata.push_back({"qwen3moe.attention.layer_norm_rms_epsilon",
                           MetaValue::scalar(float(c.number("rms_norm_eps", 1e-6)))});
  put("expert_count", g.n_expert);
  put("expert_used_count", g.n_expert_used);
  put("attention.key_length", g.head_dim);
  put("attention.value_length", g.head_dim);
  put("expert_feed_forward_length", g.n_ff_exp);
  if (g.n_expert_used <= 0 || g.n_expert_used > g.n_expert) {
    c.refuse("num_experts_per_tok ", g.n_expert_used, " outside 1..", g.n_expert);
  }
  return g;
}

// The experts of one layer as found: per expert, or fused.
struct LayerExperts {
  std::map<int64_t, const TensorInfo*> gate, up, down;
  const TensorInfo* gate_up = nullptr;  // fused [n_expert, 2 n_ff_exp, n_embd]
  const TensorInfo* fused_down = nullptr;
};

class Planner {
 public:
  Planner(const ModelFile& snapshot, Plan& plan) : snapshot_(snapshot), plan_(plan) {}

  void run(const Geometry& g) {
    g_ = g;
    layers_.resize(size_t(g.n_layer));
    std::string unknown;
    int n_unknown = 0;
    for (const TensorInfo& tensor : snapshot_.tensors()) {
      if (!place(tensor) && n_unknown++ < 5) unknown += " '" + tensor.name + "'";
    }
    if (n_unknown > 0) {
      fail("safetensors: ", snapshot_.display_name(), ": ", n_unknown,
           " tensor(s) a qwen3_moe snapshot should not have:", unknown, n_unknown > 5 ? " …" : "");
    }
    for (int64_t il = 0; il < g.n_layer; ++il) stack_experts(il);
  }

 private:
  void add(std::string name, const TensorInfo& tensor, TensorRole role) {
    PlannedTensor planned;
    planned.name = std::move(name);
    planned.ne.assign(tensor.ne.begin(), tensor.ne.begin() + tensor.n_dims);
    planned.rows = {RowRange{tensor, 0, tensor.n_dims <= 1 ? 1 : tensor.n_rows()}};
    planned.role = tensor.n_dims <= 1 ? TensorRole::kKeepF32 : role;
    if (planned.name == "token_embd.weight") plan_.n_vocab = int64_t(tensor.ne[1]);
    plan_.tensors.push_back(std::move(planned));
  }

  // Names one snapshot tensor (adding it, or recording an expert); false when unknown.
  bool place(const TensorInfo& tensor) {
    std::string_view name = tensor.name;
    if (name.starts_with("model.")) name.remove_prefix(6);
    if (name == "embed_tokens.weight")
      return add("token_embd.weight", tensor, TensorRole::kMatrix), true;
    if (name == "norm.weight") return add("output_norm.weight", tensor, TensorRole::kKeepF32), true;
    if (name == "lm_head.weight") {
      if (!g_.tied) add("output.weight", tensor, TensorRole::kMatrix);  // tied: embed_tokens
      return true;
    }
    if (!name.starts_with("layers.")) return false;
    name.remove_prefix(7);
    const size_t dot = name.find('.');
    if (dot == 0 || dot == std::string_view::npos ||
        name.substr(0, dot).find_first_not_of("0123456789") != std::string_view::npos) {
      return false;
    }
    const int64_t il = std::stoll(std::string(name.substr(0, dot)));
    if (il >= g_.n_layer) return false;
    const std::string_view rest = name.substr(dot + 1);
    const std::string blk = "blk." + std::to_string(il) + ".";
    struct Rename {
      std::string_view hf, gguf;
      TensorRole role;
    };
    static constexpr Rename kRenames[] = {
        {"input_layernorm.weight", "attn_norm.weight", TensorRole::kKeepF32},
        {"post_attention_layernorm.weight", "ffn_norm.weight", TensorRole::kKeepF32},
        {"self_attn.q_proj.weight", "attn_q.weight", TensorRole::kMatrix},
        {"self_attn.k_proj.weight", "attn_k.weight", TensorRole::kMatrix},
        {"self_attn.v_proj.weight", "attn_v.weight", TensorRole::kMatrix},
        {"self_attn.o_proj.weight", "attn_output.weight", TensorRole::kMatrix},
        {"self_attn.q_norm.weight", "attn_q_norm.weight", TensorRole::kKeepF32},
        {"self_attn.k_norm.weight", "attn_k_norm.weight", TensorRole::kKeepF32},
        {"mlp.gate.weight", "ffn_gate_inp.weight", TensorRole::kKeepF32},  // the router
    };
    for (const Rename& r : kRenames) {
      if (rest == r.hf) return add(blk + std::string(r.gguf), tensor, r.role), true;
    }
    if (rest.ends_with("rotary_emb.inv_freq")) return true;  // recomputed from rope_theta
    if (is_fp8_scale_name(rest)) return true;                // the weight's (hf_convert_fp8)
    return place_expert(il, rest, tensor);
  }

  bool place_expert(int64_t il, std::string_view rest, const TensorInfo& tensor) {
    LayerExperts& layer = layers_[size_t(il)];
    if (rest == "mlp.experts.gate_up_proj" || rest == "mlp.experts.gate_up_proj.weight") {
      return layer.gate_up = &tensor, true;
    }
    if (rest == "mlp.experts.down_proj" || rest == "mlp.experts.down_proj.weight") {
      return layer.fused_down = &tensor, true;
    }
    if (!rest.starts_with("mlp.experts.")) return false;
    rest.remove_prefix(12);
    const size_t dot = rest.find('.');
    if (dot == 0 || dot == std::string_view::npos ||
        rest.substr(0, dot).find_first_not_of("0123456789") != std::string_view::npos) {
      return false;
    }
    const int64_t expert = std::stoll(std::string(rest.substr(0, dot)));
    const std::string_view proj = rest.substr(dot + 1);
    if (expert >= g_.n_expert) return false;
    if (proj == "gate_proj.weight") return layer.gate[expert] = &tensor, true;
    if (proj == "up_proj.weight") return layer.up[expert] = &tensor, true;
    if (proj == "down_proj.weight") return layer.down[expert] = &tensor, true;
    return false;
  }

  void check_shape(const TensorInfo& tensor, std::vector<uint64_t> ne) const {
    const std::vector<uint64_t> got(tensor.ne.begin(), tensor.ne.begin() + tensor.n_dims);
    if (got != ne) {
      std::string want, have;
      for (uint64_t d : ne) want += (want.empty() ? "" : ", ") + std::to_string(d);
      for (uint64_t d : got) have += (have.empty() ? "" : ", ") + std::to_string(d);
      fail("safetensors: ", snapshot_.display_name(), ": tensor '", tensor.name,
           "' has shape (ne) [", have, "], expected [", want, "]");
    }
  }

  void stack_experts(int64_t il) {
    const LayerExperts& layer = layers_[size_t(il)];
    const uint64_t d = uint64_t(g_.n_embd), ff = uint64_t(g_.n_ff_exp), n = uint64_t(g_.n_expert);
    const std::string blk = "blk." + std::to_string(il) + ".";
    PlannedTensor gate{blk + "ffn_gate_exps.weight", {d, ff, n}, {}, TensorRole::kExperts};
    PlannedTensor up{blk + "ffn_up_exps.weight", {d, ff, n}, {}, TensorRole::kExperts};
    PlannedTensor down{blk + "ffn_down_exps.weight", {ff, d, n}, {}, TensorRole::kExperts};
    if (layer.gate_up != nullptr || layer.fused_down != nullptr) {
      if (layer.gate_up == nullptr || layer.fused_down == nullptr || !layer.gate.empty()) {
        fail("safetensors: ", snapshot_.display_name(), ": layer ", il,
             " mixes fused and per-expert tensors, or lacks one of gate_up_proj / down_proj");
      }
      check_shape(*layer.gate_up, {d, 2 * ff, n});
      check_shape(*layer.fused_down, {ff, d, n});
      for (uint64_t e = 0; e < n; ++e) {
        gate.rows.push_back({*layer.gate_up, e * 2 * ff, ff});  // chunk(2): gate first, then up
        up.rows.push_back({*layer.gate_up, e * 2 * ff + ff, ff});
      }
      down.rows.push_back({*layer.fused_down, 0, n * d});
    } else {
      for (uint64_t e = 0; e < n; ++e) {
        const auto expert = [&](const std::map<int64_t, const TensorInfo*>& map,
                                std::string_view proj) -> const TensorInfo& {
          auto it = map.find(int64_t(e));
          if (it == map.end()) {
            fail("safetensors: ", snapshot_.display_name(), ": missing tensor model.layers.", il,
                 ".mlp.experts.", e, ".", proj, ".weight");
          }
          return *it->second;
        };
        const TensorInfo& g = expert(layer.gate, "gate_proj");
        const TensorInfo& u = expert(layer.up, "up_proj");
        const TensorInfo& w = expert(layer.down, "down_proj");
        check_shape(g, {d, ff});
        check_shape(u, {d, ff});
        check_shape(w, {ff, d});
        gate.rows.push_back({g, 0, ff});
        up.rows.push_back({u, 0, ff});
        down.rows.push_back({w, 0, d});
      }
    }
    for (PlannedTensor* t : {&gate, &up, &down}) plan_.tensors.push_back(std::move(*t));
  }

  const ModelFile& snapshot_;
  Plan& plan_;
  Geometry g_;
  std::vector<LayerExperts> layers_;
};

}  // namespace

Plan plan_qwen3moe(const ModelFile& snapshot, const std::string& hf_dir) {
  const HfConfig config = HfConfig::load(hf_dir);
  const Reader reader(config);
  Plan plan;
  plan.arch = "qwen3moe";
  const Geometry g = hyper_parameters(reader, plan);
  Planner(snapshot, plan).run(g);
  if (plan.n_vocab == 0) fail("convert: ", hf_dir, ": no model.embed_tokens.weight tensor");
  if (!g.tied && snapshot.find_tensor("lm_head.weight") == nullptr) {
    fail("convert: ", hf_dir, ": lm_head.weight is missing and tie_word_embeddings is false");
  }
  return plan;
}

}  // namespace sluice::convert
