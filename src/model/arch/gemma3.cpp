// gemma3 (Gemma 3 text): sandwich-normed layers with GeGLU, Q/K norms, embeddings scaled by
// sqrt(n_embd), and five sliding-window layers (RoPE base 10000) for every global one (the
// file's rope.freq_base and linear scaling), or the per-layer attention.sliding_window_pattern
// when the file has one. Norm weights include Gemma's "+1" (the GGUF converter adds it; for a
// Hugging Face snapshot it is added at load). As llama.cpp does, the query scale is
// 1/sqrt(head_dim) except for the 62-layer 27B model, which uses 1/sqrt(n_embd / n_head).
#include <cmath>

#include "model/arch/architectures.h"
#include "model/blocks/sandwich_decoder.h"
#include "model/hf_snapshot.h"

namespace sluice::model {

std::unique_ptr<LanguageModel> make_gemma3(const ModelFile& file) {
  const ArchMetadata meta(file, "gemma3");
  SandwichDecoderConfig c;
  c.arch = "gemma3";
  c.hp = read_decoder_hparams(meta);
  c.activation = GluActivation::kGeluTanh;
  c.embd_scale = std::sqrt(float(c.hp.n_embd));
  c.post_norm_eps = c.hp.rms_eps;
  c.final_softcap = 0.0f;  // the sliding-window variant has no final soft-capping

  const int64_t window = meta.get_int("attention.sliding_window", 0);
  std::vector<bool> sliding =
      window > 0 ? sliding_pattern(c.hp.n_layer, 6) : std::vector<bool>(size_t(c.hp.n_layer));
  if (auto pattern = meta.find_per_layer("attention.sliding_window_pattern", c.hp.n_layer)) {
    for (size_t il = 0; il < sliding.size(); ++il) sliding[il] = window > 0 && (*pattern)[il];
  }
  if (file.contains(kHfNormPlusOne)) c.norm_weight_offset = 1.0f;
  // A GGUF file is computed as llama.cpp computes it, a Hugging Face snapshot as transformers.
  if (file.contains(kHfNormPlusOne)) {
    c.activation = GluActivation::kGeluTanh;
  } else {
    c.activation = GluActivation::kGeluTanhF16;
  }
  const float scale = c.hp.n_layer == 62 ? 1.0f / std::sqrt(float(c.hp.n_embd / c.hp.n_head))
                                         : 1.0f / std::sqrt(float(c.hp.head_dim_k));
  for (int64_t il = 0; il < c.hp.n_layer; ++il) {
    AttentionLayerConfig layer;
    const bool slides = sliding[size_t(il)];
    layer.rope = {RopeStyle::kNeox, c.hp.n_rot, slides ? 10000.0f : c.hp.rope_freq_base,
                  slides ? 1.0f : c.hp.rope_freq_scale, nullptr};
    layer.window = slides ? window : 0;
    layer.scale = scale;
    layer.scale_query = true;
    c.layers.push_back(layer);
  }
  return make_sandwich_decoder(file, std::move(c));
}

}  // namespace sluice::model
