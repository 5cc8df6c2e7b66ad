// The gpt-oss plan: config.json → llama.cpp's "gpt-oss.*" keys, and the snapshot's tensors →
// llama.cpp's names, with the experts planned as row ranges that undo transformers' layout
// (transposed per expert, gate/up picked from interleaved columns) or as MXFP4 copies of the
// Hub's blocks (gate/up picked from interleaved rows).
#include "runtime/hf_convert_gpt_oss.h"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"
#include "format/hf/hf_config.h"
#include "model/hf_snapshot.h"

namespace sluice::convert {
namespace {

using Json = nlohmann::json;
constexpr std::string_view kArch = "gpt-oss";

// config.json's root object, read with the key named on every refusal. Defaults are
// transformers' GptOssConfig's.
class Config {
 public:
  explicit Config(const HfConfig& hf) : json_(hf.json()), path_(hf.path()) {}

  template <class... Parts>
  [[noreturn]] void refuse(Parts&&... parts) const {
    fail("config: ", path_, ": ", std::forward<Parts>(parts)...);
  }
  const Json* find(const Json& object, std::string_view name) const {
    auto it = object.find(std::string(name));
    return it == object.end() || it->is_null() ? nullptr : &*it;
  }
  const Json* find(std::string_view name) const { return find(json_, name); }
  int64_t integer(std::string_view name, std::optional<int64_t> fallback = std::nullopt) const {
    const Json* value = find(name);
    if (value == nullptr && fallback) return *fallback;
    if (value == nullptr) refuse("missing key (key: ", name, ")");
    if (!value->is_number_integer()) refuse("expected an integer (", name, ": ", *value, ")");
    return value->get<int64_t>();
  }
  double number(const Json& object, std::string_view name, std::string_view where,
                double fallback) const {
    const Json* value = find(object, name);
    if (value == nullptr) return fallback;
    if (!value->is_number() || !std::isfinite(value->get<double>())) {
      refuse("expected a number (", where, name, ": ", *value, ")");
    }
    return value->get<double>();
  }
  double number(std::string_view name, double fallback) const {
    return number(json_, name, "", fallback);
  }
  bool boolean(std::string_view name, bool fallback) const {
    const Json* value = find(name);
    if (value == nullptr) return fallback;
    if (!value->is_boolean()) refuse("expected a boolean (", name, ": ", *value, ")");
    return value->get<bool>();
  }

 private:
  const Json& json_;
  std::string path_;
};

struct Shape {
  int64_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  int64_t n_ff = 0, n_expert = 0, n_used = 0;
  bool tied = false;
};

void put_u32(Plan& plan, const Config& c, std::string_view key, int64_t value) {
  if (value < 0 || value > int64_t(UINT32_MAX)) {
    c.refuse(kArch, ".", key, " would be ", value, ", outside 0..", UINT32_MAX);
  }
  plan.metadata.push_back(
      {std::string(kArch) + "." + std::string(key), MetaValue::scalar(uint32_t(value))});
}
void put_f32(Plan& plan, std::string_view key, double value) {
  plan.metadata.push_back(
      {std::string(kArch) + "." + std::string(key), MetaValue::scalar(float(value))});
}

// The keys TextModel and GptOssModel write in llama.cpp's converter. YaRN's `truncate` is not
// a GGUF key: llama.cpp always rounds the correction range, whatever the config says.
Shape put_hyper_parameters(const Config& c, Plan& plan) {
  Shape s;
  s.n_embd = c.integer("hidden_size");
  s.n_layer = c.integer("num_hidden_layers");
  s.n_head = c.integer("num_attention_heads");
  if (s.n_head <= 0 || s.n_layer <= 0 || s.n_embd <= 0) {
    c.refuse("hidden_size, num_attention_heads and num_hidden_layers must be positive");
  }
  s.n_head_kv = c.integer("num_key_value_heads", s.n_head);
  s.head_dim = c.integer("head_dim", s.n_embd / s.n_head);
  s.n_ff = c.integer("intermediate_size");
  s.n_expert = c.integer(c.find("num_local_experts") ? "num_local_experts" : "num_experts");
  s.n_used = c.integer("num_experts_per_tok", 4);
  if (s.n_expert <= 0 || s.n_used <= 0 || s.n_used > s.n_expert) {
    c.refuse("num_experts_per_tok must be 1..num_local_experts (", s.n_used, " of ", s.n_expert,
             ")");
  }
  s.tied = c.boolean("tie_word_embeddings", false);

  plan.metadata.push_back({"general.architecture", MetaValue::string(std::string(kArch))});
  put_u32(plan, c, "vocab_size", c.integer("vocab_size"));
  put_u32(plan, c, "context_length", c.integer("max_position_embeddings", 131072));
  put_u32(plan, c, "embedding_length", s.n_embd);
  put_u32(plan, c, "block_count", s.n_layer);
  put_u32(plan, c, "feed_forward_length", s.n_ff);
  put_u32(plan, c, "attention.head_count", s.n_head);
  put_u32(plan, c, "attention.head_count_kv", s.n_head_kv);
  put_u32(plan, c, "attention.key_length", s.head_dim);
  put_u32(plan, c, "attention.value_length", s.head_dim);
  put_f32(plan, "attention.layer_norm_rms_epsilon", c.number("rms_norm_eps", 1e-5));
  put_u32(plan, c, "expert_count", s.n_expert);
  put_u32(plan, c, "expert_used_count", s.n_used);
  put_u32(plan, c, "expert_feed_forward_length", s.n_ff);
  const int64_t window = c.integer("sliding_window", 128);
  if (window <= 0) c.refuse("sliding_window must be positive");
  put_u32(plan, c, "attention.sliding_window", window);

  // transformers 5 writes rope_parameters (with rope_theta inside); older configs rope_scaling.
  const Json* rope = c.find("rope_parameters");
  std::string where = "rope_parameters.";
  if (rope == nullptr) {
    rope = c.find("rope_scaling");
    where = "rope_scaling.";
  }
  if (rope != nullptr && !rope->is_object()) c.refuse(where, " is not an object");
  double theta = c.number("rope_theta", 150000.0);
  if (rope != nullptr) theta = c.number(*rope, "rope_theta", where, theta);
  if (!(theta > 0)) c.refuse("rope_theta must be positive");
  put_f32(plan, "rope.freq_base", theta);
  std::string type = "default";
  for (const char* name : {"rope_type", "type"}) {
    if (rope != nullptr && rope->contains(name) && rope->at(name).is_string()) {
      type = rope->at(name).get<std::string>();
      break;
    }
  }
  if (type == "yarn") {
    const double factor = c.number(*rope, "factor", where, 0.0);
    if (!(factor > 0)) c.refuse(where, "factor must be positive");
    plan.metadata.push_back({std::string(kArch) + ".rope.scaling.type", MetaValue::string("yarn")});
    put_f32(plan, "rope.scaling.factor", factor);
    if (const Json* original = c.find(*rope, "original_max_position_embeddings")) {
      if (!original->is_number_integer()) {
        c.refuse("expected an integer (", where, "original_max_position_embeddings)");
      }
      put_u32(plan, c, "rope.scaling.original_context_length", original->get<int64_t>());
    }
    const std::pair<const char*, const char*> optional_keys[] = {
        {"extrapolation_factor", "rope.scaling.yarn_ext_factor"},
        {"attention_factor", "rope.scaling.yarn_attn_factor"},
        {"beta_fast", "rope.scaling.yarn_beta_fast"},
        {"beta_slow", "rope.scaling.yarn_beta_slow"},
    };
    for (const auto& [name, key] : optional_keys) {
      if (c.find(*rope, name)) put_f32(plan, key, c.number(*rope, name, where, 0.0));
    }
  } else if (type != "default") {
    c.refuse("RoPE type '", type, "' (", where,
             "rope_type) is not supported for gpt_oss (yarn is)");
  }

  // What llama.cpp's gpt-oss graph fixes rather than reads.
  if (const Json* types = c.find("layer_types")) {
    if (!types->is_array() || int64_t(types->size()) != s.n_layer) {
      c.refuse("layer_types must list ", s.n_layer, " layers");
    }
    for (int64_t il = 0; il < s.n_layer; ++il) {
      const char* want = il % 2 == 0 ? "sliding_attention" : "full_attention";
      if (types->at(size_t(il)) != want) {
        c.refuse("layer_types[", il, "] is ", types->at(size_t(il)), "; gpt-oss in llama.cpp has ",
                 "sliding layers at even indices and full ones at odd");
      }
    }
  }
  if (const double limit = c.number("swiglu_limit", 7.0); limit != 7.0) {
    c.refuse("swiglu_limit ", limit, " is not supported (llama.cpp's swiglu_oai clamps at 7)");
  }
  if (!c.boolean("attention_bias", true)) c.refuse("attention_bias false is not supported");
  return s;
}

// llama.cpp's prepare_tensors: 1-D tensors, anything not named .weight, norms and the router
// stay F32.
TensorRole role_of(std::string_view name, uint32_t n_dims) {
  if (n_dims <= 1 || !name.ends_with(".weight") || name.ends_with("_norm.weight") ||
      name.ends_with("ffn_gate_inp.weight")) {
    return TensorRole::kKeepF32;
  }
  return TensorRole::kMatrix;
}

PlannedTensor whole(const TensorInfo& tensor, std::string name) {
  PlannedTensor planned;
  planned.name = std::move(name);
  planned.ne = {tensor.ne.begin(), tensor.ne.begin() + tensor.n_dims};
  planned.rows = {RowRange{tensor, 0, tensor.n_dims <= 1 ? 1 : tensor.n_rows()}};
  planned.role = role_of(planned.name, tensor.n_dims);
  return planned;
}

// Builds the planned tensors of one snapshot, checking each source's shape against config.json.
class Planner {
 public:
  Planner(const ModelFile& snapshot, const Shape& shape, Plan& plan)
      : snapshot_(snapshot), s_(shape), plan_(plan) {}

  void run() {
    std::string unknown;
    int n_unknown = 0;
    for (const TensorInfo& tensor : snapshot_.tensors()) {
      if (!add(tensor)) {
        if (n_unknown++ < 5) unknown += (unknown.empty() ? "'" : ", '") + tensor.name + "'";
      }
    }
    if (n_unknown > 0) {
      fail("safetensors: ", snapshot_.display_name(), ": ", n_unknown,
           " tensor(s) that a gpt_oss snapshot should not have: ", unknown,
           n_unknown > 5 ? ", …" : "");
    }
    std::vector<std::string> needed = {"token_embd.weight", "output_norm.weight"};
    if (!s_.tied) needed.push_back("output.weight");
    for (int64_t il = 0; il < s_.n_layer; ++il) {
      for (const char* part : {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight",
                               "ffn_gate_inp.weight"}) {
        needed.push_back("blk." + std::to_string(il) + "." + part);
      }
    }
    for (const std::string& name : needed) {
      if (!planned_.contains(name)) {
        fail("safetensors: ", snapshot_.display_name(), ": no tensor for ", name);
      }
    }
  }

  bool quantized() const { return quantized_; }

 private:
  void push(PlannedTensor planned) {
    if (!planned_.insert(planned.name).second) {
      fail("safetensors: ", snapshot_.display_name(), ": two tensors make ", planned.name);
    }
    if (planned.name == "token_embd.weight") plan_.n_vocab = int64_t(planned.ne.back());
    plan_.tensors.push_back(std::move(planned));
  }

  [[noreturn]] void bad_shape(const TensorInfo& tensor, std::string_view want) const {
    fail("safetensors: ", snapshot_.display_name(), ": tensor '", tensor.name, "' is not ", want);
  }
  // `ne` first dimension fastest, as TensorInfo holds it.
  void expect(const TensorInfo& tensor, std::vector<uint64_t> ne, std::string_view want) const {
    if (tensor.n_dims != ne.size()) bad_shape(tensor, want);
    for (size_t d = 0; d < ne.size(); ++d) {
      if (tensor.ne[d] != ne[d]) bad_shape(tensor, want);
    }
  }

  // false: a tensor this planner cannot name.
  bool add(const TensorInfo& tensor) {
    std::string_view name = tensor.name;
    if (name.starts_with("model.")) name.remove_prefix(6);
    if (name == "embed_tokens.weight") {
      push(whole(tensor, "token_embd.weight"));
      return true;
    }
    if (name == "norm.weight") {
      push(whole(tensor, "output_norm.weight"));
      return true;
    }
    if (tensor.name == "lm_head.weight") {
      // Tied: transformers reads the head from embed_tokens whatever lm_head holds.
      if (!s_.tied) push(whole(tensor, "output.weight"));
      return true;
    }
    if (!name.starts_with("layers.")) return false;
    name.remove_prefix(7);
    const size_t dot = name.find('.');
    const std::string_view layer = name.substr(0, dot);
    int64_t index = -1;
    const auto [end, error] = std::from_chars(layer.data(), layer.data() + layer.size(), index);
    if (dot == std::string_view::npos || error != std::errc() ||
        end != layer.data() + layer.size() || index < 0 || index >= s_.n_layer) {
      return false;
    }
    const std::string_view rest = name.substr(dot + 1);
    const std::string blk = "blk." + std::string(layer) + ".";
    if (const auto name = model::hf_attention_tensor(rest)) {
      push(whole(tensor, blk + std::string(*name)));
      return true;
    }
    static constexpr std::pair<std::string_view, std::string_view> kRenames[] = {
        {"self_attn.sinks", "attn_sinks.weight"},
        {"post_attention_layernorm.weight", "post_attention_norm.weight"},
        {"mlp.router.weight", "ffn_gate_inp.weight"},
        {"mlp.router.bias", "ffn_gate_inp.bias"},
    };
    for (const auto& [hf, gguf] : kRenames) {
      if (rest == hf) {
        push(whole(tensor, blk + std::string(gguf)));
        return true;
      }
    }
    if (rest.ends_with("rotary_emb.inv_freq")) return true;  // recomputed from rope_theta
    const uint64_t E = uint64_t(s_.n_expert), ff = uint64_t(s_.n_ff), d = uint64_t(s_.n_embd);
    if (rest == "mlp.experts.gate_up_proj") {
      expect(tensor, {2 * ff, d, E}, "[n_expert, hidden_size, 2 * intermediate_size]");
      push(transposed_experts(tensor, blk + "ffn_gate_exps.weight", 0, 2));
      push(transposed_experts(tensor, blk + "ffn_up_exps.weight", 1, 2));
      return true;
    }
    if (rest == "mlp.experts.down_proj") {
      expect(tensor, {d, ff, E}, "[n_expert, intermediate_size, hidden_size]");
      push(transposed_experts(tensor, blk + "ffn_down_exps.weight", 0, 1));
      return true;
    }
    if (rest == "mlp.experts.gate_up_proj_bias") {
      expect(tensor, {2 * ff, E}, "[n_expert, 2 * intermediate_size]");
      for (uint64_t h = 0; h < 2; ++h) {
        PlannedTensor half =
            whole(tensor, blk + (h == 0 ? "ffn_gate_exps.bias" : "ffn_up_exps.bias"));
        half.ne = {ff, E};
        half.rows.front().first_column = h;
        half.rows.front().column_step = 2;
        push(std::move(half));
      }
      return true;
    }
    if (rest == "mlp.experts.down_proj_bias") {
      expect(tensor, {d, E}, "[n_expert, hidden_size]");
      {
        push(whole(tensor, blk + "ffn_down_exps.bias"));
        return true;
      }
    }
    for (const std::string_view part : {"gate_up_proj", "down_proj"}) {
      const std::string stem = "mlp.experts." + std::string(part);
      if (rest == stem + "_blocks") return true;  // planned with its scales
      if (rest != stem + "_scales") continue;
      const std::string values_name =
          tensor.name.substr(0, tensor.name.size() - std::string_view("_scales").size()) +
          "_blocks";
      const TensorInfo* values = snapshot_.find_tensor(values_name);
      if (values == nullptr) {
        fail("safetensors: ", snapshot_.display_name(), ": '", tensor.name, "' has no '",
             values_name, "'");
      }
      quantized_ = true;
      if (part == "gate_up_proj") {
        expect_mxfp4(*values, tensor, 2 * ff, d);
        push(mxfp4_experts(*values, tensor, blk + "ffn_gate_exps.weight", d, ff, 0, 2));
        push(mxfp4_experts(*values, tensor, blk + "ffn_up_exps.weight", d, ff, 1, 2));
      } else {
        expect_mxfp4(*values, tensor, d, ff);
        push(mxfp4_experts(*values, tensor, blk + "ffn_down_exps.weight", ff, d, 0, 1));
      }
      return true;
    }
    return false;
  }

  // transformers' [n_expert, in, out] stack: each expert's matrix is written transposed, of its
  // columns (output features) only first, first + step, ….
  PlannedTensor transposed_experts(const TensorInfo& stack, std::string name, uint64_t first,
                                   uint64_t step) const {
    PlannedTensor planned;
    planned.name = std::move(name);
    const uint64_t in = stack.ne[1], out = stack.ne[0] / step, n_expert = stack.ne[2];
    planned.ne = {in, out, n_expert};
    planned.role = TensorRole::kExperts;
    for (uint64_t e = 0; e < n_expert; ++e) {
      TensorInfo piece = stack;
      piece.n_dims = 2;
      piece.ne = {stack.ne[0], stack.ne[1], 1, 1};
      piece.n_elements = stack.ne[0] * stack.ne[1];
      piece.n_bytes = stack.n_bytes / n_expert;
      piece.offset = stack.offset + e * piece.n_bytes;
      RowRange range{piece, 0, out};
      range.transpose = true;
      range.first_column = first;
      range.column_step = step;
      planned.rows.push_back(std::move(range));
    }
    return planned;
  }

  // The Hub's [n_expert, rows, n / 32, 16] values and [n_expert, rows, n / 32] exponents.
  void expect_mxfp4(const TensorInfo& values, const TensorInfo& scales, uint64_t rows,
                    uint64_t n) const {
    const uint64_t E = uint64_t(s_.n_expert);
    if (n % 32 != 0) bad_shape(values, "MXFP4 blocks of a row length divisible by 32");
    if (values.type != QType::U8 || scales.type != QType::U8) {
      bad_shape(values.type != QType::U8 ? values : scales, "U8 (MXFP4 blocks and exponents)");
    }
    expect(values, {16, n / 32, rows, E}, "[n_expert, rows, row length / 32, 16] MXFP4 blocks");
    expect(scales, {n / 32, rows, E}, "[n_expert, rows, row length / 32] MXFP4 exponents");
  }

  // GGUF rows first, first + step, … of the Hub's [n_expert * rows] block rows.
  PlannedTensor mxfp4_experts(const TensorInfo& values, const TensorInfo& scales, std::string name,
                              uint64_t n, uint64_t rows, uint64_t first, uint64_t step) const {
    PlannedTensor planned;
    planned.name = std::move(name);
    const uint64_t n_expert = uint64_t(s_.n_expert);
    planned.ne = {n, rows, n_expert};
    planned.role = TensorRole::kMxfp4Copy;
    RowRange range{values, first, rows * n_expert};
    range.row_step = step;
    range.mxfp4_scales = scales;
    planned.rows.push_back(std::move(range));
    return planned;
  }

  const ModelFile& snapshot_;
  const Shape& s_;
  Plan& plan_;
  std::set<std::string> planned_;
  bool quantized_ = false;
};

// quantization_config: absent, or quant_method "mxfp4" (the Hub's experts).
bool says_mxfp4(const Config& c) {
  const Json* q = c.find("quantization_config");
  if (q == nullptr) return false;
  const std::string method =
      q->is_object() ? q->value("quant_method", std::string()) : std::string();
  if (method != "mxfp4") {
    c.refuse("quantization_config.quant_method '", method,
             "' cannot be converted for gpt_oss (mxfp4 experts can)");
  }
  return true;
}

}  // namespace

std::optional<Plan> plan_gpt_oss(const ModelFile& snapshot, const std::string& hf_dir) {
  const HfConfig hf = HfConfig::load(hf_dir);
  const Json& json = hf.json();
  if (!json.is_object() || json.value("model_type", Json()) != "gpt_oss") return std::nullopt;
  const Config config(hf);
  Plan plan;
  plan.arch = std::string(kArch);
  const Shape shape = put_hyper_parameters(config, plan);
  const bool mxfp4 = says_mxfp4(config);
  Planner planner(snapshot, shape, plan);
  planner.run();
  if (planner.quantized() && !mxfp4) {
    config.refuse("the experts are MXFP4 blocks but quantization_config.quant_method is not mxfp4");
  }
  return plan;
}

void mxfp4_row_from_hub(const uint8_t* values, const uint8_t* exponents, uint64_t n_blocks,
                        uint8_t* out) {
  for (uint64_t b = 0; b < n_blocks; ++b, values += 16, out += 17) {
    out[0] = exponents[b];
    // Value k of the block sits in byte k / 2, low nibble for even k. GGUF's byte j holds value
    // j low and value j + 16 high.
    const auto value = [&](int k) { return (values[k / 2] >> (4 * (k % 2))) & 0x0F; };
    for (int j = 0; j < 16; ++j) out[1 + j] = uint8_t(value(j) | (value(j + 16) << 4));
  }
}

void check_mxfp4_rows(const ModelFile& snapshot, const PlannedTensor& tensor,
                      const RowRange& range) {
  const TensorInfo& values = range.tensor;
  const TensorInfo& exponents = *range.mxfp4_scales;
  const uint64_t n = tensor.ne.empty() ? 0 : tensor.ne[0];
  const uint64_t n_blocks = n / 32;
  const uint64_t rows = n_blocks == 0 ? 0 : values.n_bytes / (n_blocks * 16);
  if (tensor.role != TensorRole::kMxfp4Copy || n == 0 || n % 32 != 0 || values.type != QType::U8 ||
      exponents.type != QType::U8 || values.n_bytes != rows * n_blocks * 16 ||
      exponents.n_bytes != rows * n_blocks || range.row_step == 0 ||
      (range.n_rows != 0 && range.first_row + (range.n_rows - 1) * range.row_step >= rows)) {
    fail("safetensors: ", snapshot.display_name(), ": '", values.name, "' and '", exponents.name,
         "' are not MXFP4 blocks of ", tensor.name, "'s rows of ", n);
  }
}

}  // namespace sluice::convert
