// ArchMetadata's typed lookups and read_decoder_hparams.
#include "model/hparams.h"

#include <cmath>

#include "core/error.h"

namespace sluice::model {
namespace {

std::optional<int64_t> integer_of(const MetaValue& value) {
  if (auto v = value.as<uint8_t>()) return *v;
  if (auto v = value.as<int8_t>()) return *v;
  if (auto v = value.as<uint16_t>()) return *v;
  if (auto v = value.as<int16_t>()) return *v;
  if (auto v = value.as<uint32_t>()) return *v;
  if (auto v = value.as<int32_t>()) return *v;
  if (auto v = value.as<int64_t>()) return *v;
  if (auto v = value.as<uint64_t>()) {
    if (*v <= uint64_t(INT64_MAX)) return int64_t(*v);
  }
  return std::nullopt;
}

template <class T>
std::optional<std::vector<int64_t>> widen(const MetaValue& value) {
  auto values = value.array_as<T>();
  if (!values) return std::nullopt;
  return std::vector<int64_t>(values->begin(), values->end());
}

}  // namespace

ArchMetadata::ArchMetadata(const ModelFile& file, std::string arch)
    : file_(file), arch_(std::move(arch)) {}

std::string ArchMetadata::full_key(std::string_view key) const {
  return arch_ + "." + std::string(key);
}

void ArchMetadata::refuse(std::string_view key, const std::string& what) const {
  fail(file_.format_name(), ": ", file_.display_name(), ": ", full_key(key), ": ", what);
}

std::optional<int64_t> ArchMetadata::find_int(std::string_view key) const {
  const MetaValue* value = file_.find(full_key(key));
  if (value == nullptr) return std::nullopt;
  auto result = integer_of(*value);
  if (!result)
    refuse(key,
           std::string("expected an integer, found ") + std::string(meta_type_name(value->type())));
  return result;
}

std::optional<float> ArchMetadata::find_float(std::string_view key) const {
  const MetaValue* value = file_.find(full_key(key));
  if (value == nullptr) return std::nullopt;
  if (auto v = value->as<float>()) return *v;
  if (auto v = value->as<double>()) return float(*v);
  if (auto v = integer_of(*value)) return float(*v);
  refuse(key,
         std::string("expected a number, found ") + std::string(meta_type_name(value->type())));
}

int64_t ArchMetadata::get_int(std::string_view key) const {
  auto v = find_int(key);
  if (!v) refuse(key, "missing");
  return *v;
}

float ArchMetadata::get_float(std::string_view key) const {
  auto v = find_float(key);
  if (!v) refuse(key, "missing");
  if (!std::isfinite(*v)) refuse(key, "not a finite number");
  return *v;
}

int64_t ArchMetadata::get_int(std::string_view key, int64_t fallback) const {
  return find_int(key).value_or(fallback);
}

float ArchMetadata::get_float(std::string_view key, float fallback) const {
  return find_float(key) ? get_float(key) : fallback;
}

std::optional<std::vector<int64_t>> ArchMetadata::find_per_layer(std::string_view key,
                                                                 int64_t n_layer) const {
  const MetaValue* value = file_.find(full_key(key));
  if (value == nullptr) return std::nullopt;
  if (!value->is_array()) return std::vector<int64_t>(size_t(n_layer), get_int(key));
  std::optional<std::vector<int64_t>> values;
  if (!values) values = widen<uint32_t>(*value);
  if (!values) values = widen<int32_t>(*value);
  if (!values) values = widen<uint8_t>(*value);
  if (!values) values = widen<int8_t>(*value);
  if (!values) values = widen<uint16_t>(*value);
  if (!values) values = widen<int16_t>(*value);
  if (!values) values = widen<int64_t>(*value);
  if (!values) values = widen<bool>(*value);
  if (!values) refuse(key, "expected an integer array");
  if (int64_t(values->size()) != n_layer) {
    refuse(key, "has " + std::to_string(values->size()) + " entries for " +
                    std::to_string(n_layer) + " layers");
  }
  return values;
}

std::vector<int64_t> ArchMetadata::get_per_layer(std::string_view key, int64_t n_layer) const {
  auto values = find_per_layer(key, n_layer);
  if (!values) refuse(key, "missing");
  return *values;
}

int64_t ArchMetadata::checked(std::string_view key, int64_t value, int64_t lo, int64_t hi) const {
  if (value < lo || value > hi) {
    refuse(key,
           std::to_string(value) + " is outside " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  return value;
}

namespace {

int64_t uniform_per_layer(const ArchMetadata& meta, std::string_view key, int64_t n_layer,
                          std::optional<int64_t> fallback) {
  auto values = meta.find_per_layer(key, n_layer);
  if (!values) {
    if (fallback) return *fallback;
    return meta.get_int(key);  // throws "missing"
  }
  for (int64_t v : *values) {
    if (v != values->front()) {
      fail(meta.file().display_name(), ": ", meta.arch(), ".", key,
           ": per-layer values that differ are not supported");
    }
  }
  return values->empty() ? 0 : values->front();
}

}  // namespace

DecoderHParams read_decoder_hparams(const ArchMetadata& meta, HeadCounts heads) {
  constexpr int64_t kMaxDim = int64_t(1) << 20;
  DecoderHParams hp;
  hp.n_embd = meta.checked("embedding_length", meta.get_int("embedding_length"), 1, kMaxDim);
  hp.n_layer = meta.checked("block_count", meta.get_int("block_count"), 1, 4096);
  // A file whose every FFN is experts may omit it, as llama.cpp allows (qwen3next): 0 then.
  const bool all_experts = meta.find_int("expert_count").has_value();
  hp.n_ff = meta.checked("feed_forward_length",
                         uniform_per_layer(meta, "feed_forward_length", hp.n_layer,
                                           all_experts ? std::optional<int64_t>(0) : std::nullopt),
                         all_experts ? 0 : 1, kMaxDim);
  hp.n_head =
      meta.checked("attention.head_count",
                   heads == HeadCounts::kPerLayer
                       ? meta.get_per_layer("attention.head_count", hp.n_layer).front()
                       : uniform_per_layer(meta, "attention.head_count", hp.n_layer, std::nullopt),
                   1, 4096);
  hp.n_head_kv = meta.checked(
      "attention.head_count_kv",
      uniform_per_layer(meta, "attention.head_count_kv", hp.n_layer, hp.n_head), 1, hp.n_head);
  if (hp.n_head % hp.n_head_kv != 0) {
    meta.checked("attention.head_count_kv", -1, 1, hp.n_head);  // refuses with the key
  }
  const int64_t default_head_dim = hp.n_embd / hp.n_head;
  hp.head_dim_k = meta.checked("attention.key_length",
                               meta.get_int("attention.key_length", default_head_dim), 1, 1024);
  hp.head_dim_v = meta.checked("attention.value_length",
                               meta.get_int("attention.value_length", default_head_dim), 1, 1024);
  hp.n_ctx_train =
      meta.checked("context_length", meta.get_int("context_length", 4096), 1, int64_t(1) << 30);
  hp.n_rot = meta.checked("rope.dimension_count",
                          meta.get_int("rope.dimension_count", hp.head_dim_k), 0, hp.head_dim_k);
  hp.rms_eps = meta.get_float("attention.layer_norm_rms_epsilon", 1e-5f);
  hp.rope_freq_base = meta.get_float("rope.freq_base", 10000.0f);
  const float scaling = meta.get_float("rope.scaling.factor", 1.0f);
  hp.rope_freq_scale = scaling > 0.0f ? 1.0f / scaling : 1.0f;

  if (auto n_vocab = meta.find_int("vocab_size")) {
    hp.n_vocab = *n_vocab;
  } else {
    const TensorInfo& embd = meta.file().tensor("token_embd.weight");
    hp.n_vocab = int64_t(embd.ne[1]);
  }
  meta.checked("vocab_size", hp.n_vocab, 1, int64_t(1) << 24);
  return hp;
}

MoeHParams read_moe_hparams(const ArchMetadata& meta, const DecoderHParams& hp) {
  MoeHParams moe;
  moe.n_expert = meta.checked("expert_count", meta.get_int("expert_count"), 1, 1 << 16);
  moe.n_expert_used =
      meta.checked("expert_used_count", meta.get_int("expert_used_count"), 1, moe.n_expert);
  moe.n_ff_exp = meta.checked("expert_feed_forward_length",
                              meta.get_int("expert_feed_forward_length", hp.n_ff), 1, 1 << 20);
  moe.n_expert_shared =
      meta.checked("expert_shared_count", meta.get_int("expert_shared_count", 0), 0, 1 << 10);
  moe.n_ff_shexp =
      meta.checked("expert_shared_feed_forward_length",
                   meta.get_int("expert_shared_feed_forward_length", moe.n_ff_exp), 1, 1 << 20);
  moe.n_layer_dense_lead = meta.checked(
      "leading_dense_block_count", meta.get_int("leading_dense_block_count", 0), 0, hp.n_layer);
  moe.n_group =
      meta.checked("expert_group_count", meta.get_int("expert_group_count", 0), 0, moe.n_expert);
  moe.n_group_used = meta.checked("expert_group_used_count",
                                  meta.get_int("expert_group_used_count", 0), 0, moe.n_group);
  if (moe.n_group > 1 && moe.n_expert % moe.n_group != 0) {
    meta.checked("expert_group_count", moe.n_group, 1, 0);  // refuses, naming the key
  }
  moe.weights_scale = meta.get_float("expert_weights_scale", 0.0f);
  if (const MetaValue* norm = meta.file().find(meta.arch() + ".expert_weights_norm")) {
    moe.weights_norm = norm->as<bool>();
  }
  if (auto gating = meta.find_int("expert_gating_func")) {
    moe.gating_func = meta.checked("expert_gating_func", *gating, 1, 3);
  }
  return moe;
}

}  // namespace sluice::model
