// muse-glimmer (Meta Muse Glimmer, dense): sandwich-normed layers with SwiGLU, an RMS-normed
// input embedding, Q/K norms, a sigmoid gate on the attention output, RoPE only on the sliding
// layers (the global layers use no position encoding), post-branch norms with eps 1e-8, and
// logits multiplied by logit_scale then soft-capped. Sliding pattern: the file's
// attention.sliding_window_pattern (a period, or one flag per layer), else a period of 4.
#include <cmath>

#include "model/arch/architectures.h"
#include "model/blocks/sandwich_decoder.h"

namespace sluice::model {

std::unique_ptr<LanguageModel> make_muse_glimmer(const ModelFile& file) {
  const ArchMetadata meta(file, "muse-glimmer");
  SandwichDecoderConfig c;
  c.arch = "muse-glimmer";
  c.hp = read_decoder_hparams(meta);
  c.activation = GluActivation::kSilu;
  c.embd_norm = true;
  c.post_norm_eps = 1e-8f;
  c.attn_gate = true;
  c.require_output = true;
  c.logit_scale = meta.get_float("logit_scale");
  c.final_softcap = meta.get_float("final_logit_softcapping", 0.0f);

  const int64_t n_layer = c.hp.n_layer;
  std::vector<bool> sliding;
  const MetaValue* pattern = file.find("muse-glimmer.attention.sliding_window_pattern");
  if (pattern != nullptr && pattern->is_array()) {
    for (int64_t flag : meta.get_per_layer("attention.sliding_window_pattern", n_layer)) {
      sliding.push_back(flag != 0);
    }
  } else {
    sliding = sliding_pattern(n_layer, meta.get_int("attention.sliding_window_pattern", 4));
  }
  const int64_t window = meta.get_int("attention.sliding_window", 0);
  const float base_swa = meta.get_float("rope.freq_base_swa", c.hp.rope_freq_base);
  for (int64_t il = 0; il < n_layer; ++il) {
    AttentionLayerConfig layer;
    const bool slides = sliding[size_t(il)];
    layer.rope = {slides ? RopeStyle::kNormal : RopeStyle::kNone, c.hp.n_rot, base_swa,
                  c.hp.rope_freq_scale, nullptr};
    layer.window = slides ? window : 0;
    layer.scale = 1.0f / std::sqrt(float(c.hp.head_dim_k));
    c.layers.push_back(layer);
  }
  return make_sandwich_decoder(file, std::move(c));
}

}  // namespace sluice::model
