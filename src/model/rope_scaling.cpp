// rope.scaling.* as llama_model's loader and llama_context's constructor read them; the float
// expressions are written as ggml's build contracts them (a*b + c fused).
#include "model/rope_scaling.h"

#include <cmath>
#include <string>

#include "core/error.h"

namespace sluice::model {
namespace {

// llama_context's get_mscale: YaRN's magnitude correction for a scaling factor.
float yarn_mscale(float scale, float mscale) {
  return scale <= 1.0f ? 1.0f : std::fma(0.1f * mscale, std::log(scale), 1.0f);
}

std::string scaling_type(const ArchMetadata& meta) {
  const MetaValue* value = meta.file().find(meta.arch() + ".rope.scaling.type");
  if (value == nullptr) return "linear";  // llama.cpp's default when the key is absent
  const std::string* text = value->as_string();
  if (text == nullptr || (*text != "none" && *text != "linear" && *text != "yarn")) {
    fail(meta.file().display_name(), ": ", meta.arch(),
         ".rope.scaling.type: only none, linear and yarn are supported",
         text != nullptr ? " (found '" + *text + "')" : std::string());
  }
  return *text;
}

}  // namespace

RopeScaling read_rope_scaling(const ArchMetadata& meta, int64_t n_ctx_train, bool deepseek_yarn) {
  RopeScaling s;
  const std::string type = scaling_type(meta);
  float factor = meta.get_float("rope.scaling.factor", 0.0f);
  if (factor == 0.0f) factor = meta.get_float("rope.scale_linear", 0.0f);
  if (factor < 0.0f) meta.checked("rope.scaling.factor", -1, 0, INT64_MAX);  // refuses
  s.freq_scale = factor == 0.0f || type == "none" ? 1.0f : 1.0f / factor;
  s.ext_factor = type == "yarn" ? 1.0f : 0.0f;
  s.n_ctx_orig = meta.checked("rope.scaling.original_context_length",
                              meta.get_int("rope.scaling.original_context_length", n_ctx_train), 1,
                              int64_t(1) << 30);
  s.beta_fast = meta.get_float("rope.scaling.yarn_beta_fast", 32.0f);
  s.beta_slow = meta.get_float("rope.scaling.yarn_beta_slow", 1.0f);
  if (deepseek_yarn)
    s.yarn_log_mul = meta.get_float("rope.scaling.yarn_log_multiplier", 0.0f) / 0.1f;

  if (s.ext_factor != 0.0f) {
    const float scale = 1.0f / s.freq_scale;
    if (s.yarn_log_mul != 0.0f) {
      // llama.cpp assumes mscale 1 except for DeepSeek V2, whose config sets mscale =
      // mscale_all_dim: there the two cancel.
      const float mscale_all_dims = s.yarn_log_mul;
      const float mscale = deepseek_yarn && mscale_all_dims != 1.0f ? mscale_all_dims : 1.0f;
      s.attn_factor = yarn_mscale(scale, mscale) / yarn_mscale(scale, mscale_all_dims);
    } else {
      s.attn_factor = yarn_mscale(scale, 1.0f);
    }
    // ggml's rope multiplies by 1 + 0.1 ln(scale) itself when ext_factor != 0: cancelled here.
    s.attn_factor *= 1.0f / std::fma(0.1f, std::log(scale), 1.0f);
  }
  s.attn_factor *= meta.get_float("rope.scaling.attn_factor", 1.0f);
  return s;
}

void apply_rope_scaling(const RopeScaling& scaling, RopeConfig& config) {
  config.freq_scale = scaling.freq_scale;
  config.ext_factor = scaling.ext_factor;
  config.attn_factor = scaling.attn_factor;
  config.beta_fast = scaling.beta_fast;
  config.beta_slow = scaling.beta_slow;
  config.n_ctx_orig = scaling.n_ctx_orig;
}

}  // namespace sluice::model
