// The tokenizer.ggml.* keys of a converted snapshot, from the same TokenizerSpec Sluice builds
// from tokenizer.json, written the way llama.cpp's converter writes them (vocabulary padded to
// the embedding rows with [PADn] tokens, added tokens that look special marked control), so
// that llama.cpp and Sluice give the same ids from the GGUF as Sluice gives from tokenizer.json.
#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "format/hf/hf_config.h"
#include "runtime/hf_convert_plan.h"
#include "text/tokenizer/hf_tokenizer_json.h"
#include "text/tokenizer/pre_tokenizer.h"

namespace sluice::convert {
namespace {

using text::TokenizerKind;
using text::TokenizerSpec;
using text::TokenType;

// llama.cpp's does_token_look_special: added tokens some models forget to mark special.
bool looks_special(std::string_view token) {
  return token == "<pad>" || token == "<mask>" || token == "<2mass>" || token == "[@BOS@]" ||
         (token.starts_with("<|") && token.ends_with("|>")) ||
         (token.starts_with("<｜") && token.ends_with("｜>")) ||
         (token.starts_with("<unused") && token.ends_with(">"));
}

// The tokenizer.ggml.pre name whose regexes (and merge rule) are the tokenizer.json's. llama.cpp
// recognises the tokenizer by a hash of its output; the same regexes are the same behaviour in
// both engines, and among equal ones the family's own name is preferred.
std::string pre_tokenizer_name(const TokenizerSpec& spec, const std::string& arch,
                               const std::string& source) {
  // llama.cpp's names for the families' own tokenizers (SmolLM is a llama).
  const std::vector<std::string> preferred =
      arch == "llama"            ? std::vector<std::string>{"llama-bpe", "smollm"}
      : arch.starts_with("qwen") ? std::vector<std::string>{"qwen2"}
                                 : std::vector<std::string>{};
  std::string first, first_same_merges;
  for (const std::string& name : text::supported_pre_tokenizers()) {
    const auto info = text::pre_tokenizer_info(name);
    if (name.empty() || !info || info->regexes != spec.pre_regexes) continue;
    const bool same_merges = info->ignore_merges == spec.ignore_merges;
    if (same_merges && std::find(preferred.begin(), preferred.end(), name) != preferred.end()) {
      return name;
    }
    if (first.empty()) first = name;
    if (first_same_merges.empty() && same_merges) first_same_merges = name;
  }
  if (!first_same_merges.empty()) return first_same_merges;
  if (!first.empty()) return first;
  fail("tokenizer: ", source,
       ": its pre-tokenizer regexes match no tokenizer.ggml.pre name llama.cpp knows");
}

// SentencePiece-style BPE in tokenizer.json has merges and no scores; llama.cpp's SentencePiece
// tokenizer merges by score, so each token scores minus the rank of the first merge making it
// (pieces no merge makes score below every merge).
std::vector<float> scores_from_merges(const TokenizerSpec& spec) {
  std::map<std::string, size_t> rank;
  for (size_t i = 0; i < spec.merges.size(); ++i) {
    const std::string& merge = spec.merges[i];
    const size_t space = merge.find(' ');
    if (space == std::string::npos) continue;
    rank.emplace(merge.substr(0, space) + merge.substr(space + 1), i);
  }
  std::vector<float> scores(spec.tokens.size());
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    auto it = rank.find(spec.tokens[id]);
    scores[id] = it != rank.end() ? -float(it->second) : -float(spec.merges.size() + id);
  }
  return scores;
}

// An id from config.json (`<role>_token_id`, an integer or a list whose first entry counts),
// the fallback llama.cpp's SpecialVocab uses when tokenizer_config.json names no such token.
std::optional<int64_t> config_id(const HfConfig& config, const std::string& key) {
  if (!config.contains(key)) return std::nullopt;
  const nlohmann::json& value = config.json().at(key);
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_array() && !value.empty() && value[0].is_number_integer()) {
    return value[0].get<int64_t>();
  }
  return std::nullopt;
}

// Token texts and types as llama.cpp's converter writes them: [PADn] for ids without a token
// (holes and the padding up to the embedding rows), added tokens that look special as control,
// and the U+2581 of byte-level user-defined tokens as plain spaces.
std::pair<std::vector<std::string>, std::vector<int32_t>> gguf_tokens(const TokenizerSpec& spec,
                                                                      size_t n_vocab,
                                                                      bool byte_level) {
  std::vector<std::string> tokens(n_vocab);
  std::vector<int32_t> types(n_vocab);
  for (size_t id = 0; id < n_vocab; ++id) {
    TokenType type = id < spec.tokens.size() ? spec.types[id] : TokenType::Unused;
    std::string token = id < spec.tokens.size() ? spec.tokens[id] : std::string();
    if (type == TokenType::Unused) token = "[PAD" + std::to_string(id) + "]";
    if (type == TokenType::UserDefined && looks_special(token)) type = TokenType::Control;
    if (type == TokenType::UserDefined && byte_level) {
      for (size_t at; (at = token.find("\xe2\x96\x81")) != std::string::npos;) {
        token.replace(at, 3, " ");
      }
    }
    tokens[id] = std::move(token);
    types[id] = int32_t(type);
  }
  return {std::move(tokens), std::move(types)};
}

}  // namespace

void add_vocabulary(const std::string& hf_dir, Plan& plan) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::path path = fs::path(hf_dir) / "tokenizer.json";
  if (!fs::is_regular_file(path, error)) {
    fail("convert: ", hf_dir, ": no tokenizer.json (a tokenizer.model alone is not supported)");
  }
  const TokenizerSpec spec = text::load_hf_tokenizer_spec(path.string());
  const size_t n_vocab = size_t(plan.n_vocab);
  if (spec.tokens.size() > n_vocab) {
    fail("tokenizer: ", path.string(), ": ", spec.tokens.size(), " tokens, but the model embeds ",
         n_vocab);
  }
  const bool byte_level = spec.kind == TokenizerKind::BytePairByteLevel;
  auto [tokens, types] = gguf_tokens(spec, n_vocab, byte_level);

  auto put = [&](std::string key, MetaValue value) {
    plan.metadata.push_back({"tokenizer.ggml." + key, std::move(value)});
  };
  put("model", MetaValue::string(byte_level ? "gpt2" : "llama"));
  if (byte_level) put("pre", MetaValue::string(pre_tokenizer_name(spec, plan.arch, path.string())));
  put("tokens", MetaValue::string_array(std::move(tokens)));
  if (!byte_level) {
    std::vector<float> scores = scores_from_merges(spec);
    scores.resize(n_vocab, -float(spec.merges.size() + n_vocab));
    put("scores", MetaValue::array(scores));
  }
  put("token_type", MetaValue::array(types));
  if (byte_level) put("merges", MetaValue::string_array(spec.merges));

  const HfConfig config = HfConfig::load(hf_dir);
  const std::pair<const char*, std::optional<text::TokenId>> roles[] = {{"bos", spec.bos},
                                                                        {"eos", spec.eos},
                                                                        {"unknown", spec.unk},
                                                                        {"seperator", spec.sep},
                                                                        {"padding", spec.pad}};
  for (const auto& [role, id] : roles) {
    const std::string hf_role = role == std::string("unknown")     ? "unk"
                                : role == std::string("seperator") ? "sep"
                                : role == std::string("padding")   ? "pad"
                                                                   : role;
    // -1: none (a plain integer: GCC 12 misreads a copied std::optional as uninitialised).
    const int64_t value = id ? int64_t(*id) : config_id(config, hf_role + "_token_id").value_or(-1);
    if (value >= 0 && value < int64_t(n_vocab)) {
      put(std::string(role) + "_token_id", MetaValue::scalar(uint32_t(value)));
    }
  }
  put("add_bos_token", MetaValue::scalar(spec.add_bos));
  put("add_eos_token", MetaValue::scalar(spec.add_eos));
  if (!byte_level) put("add_space_prefix", MetaValue::scalar(spec.add_space_prefix));
  if (!spec.chat_template.empty()) {
    plan.metadata.push_back({"tokenizer.chat_template", MetaValue::string(spec.chat_template)});
  }
}

}  // namespace sluice::convert
