// tokenizer.json → TokenizerSpec. Each pipeline stage (normalizer, pre_tokenizer, model,
// post_processor) is mapped onto the spec's fields; a stage the spec cannot express is refused
// with its type named, never approximated, because a silently different pre-tokenizer gives
// plausible-looking but wrong ids.
#include "text/tokenizer/hf_tokenizer_json.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "text/tokenizer/special_token_roles.h"
#include "text/tokenizer/unicode_normalization.h"

namespace sluice::text {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// GPT-2's split pattern: what ByteLevel applies when its use_regex is on (the default).
constexpr std::string_view kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// What the pre-tokenizer and normalizer stages amount to.
struct Pipeline {
  std::vector<std::string> regexes;  // Split/Digits/ByteLevel patterns, in order
  bool byte_level = false;           // a ByteLevel pre-tokenizer (byte→unicode mapping)
  bool metaspace = false;            // a Metaspace pre-tokenizer (spaces → U+2581)
  bool prefix_space = false;         // Prepend("▁") or Metaspace prepend_scheme always/first
  bool spaces_replaced = false;      // normalizer Replace(" " → "▁")
  UnicodeNormalization normalization = UnicodeNormalization::None;  // NFC/NFD/NFKC/NFKD
};

class Mapper {
 public:
  explicit Mapper(std::string_view source) : source_(source) {}

  template <class... Parts>
  [[noreturn]] void refuse(Parts&&... parts) const {
    fail("tokenizer.json: ", source_, ": ", std::forward<Parts>(parts)...);
  }

  const Json& member(const Json& node, const char* key, std::string_view where) const {
    if (!node.is_object() || !node.contains(key)) refuse(where, ": missing '", key, "'");
    return node.at(key);
  }

  std::string string_of(const Json& node, const char* key, std::string_view where) const {
    const Json& value = member(node, key, where);
    if (!value.is_string()) refuse(where, ".", key, ": expected a string");
    return value.get<std::string>();
  }

  bool flag(const Json& node, const char* key, bool fallback) const {
    if (!node.is_object() || !node.contains(key) || node.at(key).is_null()) return fallback;
    if (!node.at(key).is_boolean()) refuse("'", key, "' is not a boolean");
    return node.at(key).get<bool>();
  }

  void add_normalizer(const Json& node, Pipeline& pipeline) const;
  void add_pre_tokenizer(const Json& node, Pipeline& pipeline) const;
  void add_split(const Json& node, Pipeline& pipeline) const;
  void add_metaspace(const Json& node, Pipeline& pipeline) const;

 private:
  std::string source_;
};

// A literal as a PCRE2 pattern.
std::string regex_escape(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

void Mapper::add_normalizer(const Json& node, Pipeline& pipeline) const {
  if (node.is_null()) return;
  const std::string type = string_of(node, "type", "normalizer");
  if (type == "Sequence") {
    for (const Json& child : member(node, "normalizers", "normalizer Sequence")) {
      add_normalizer(child, pipeline);
    }
  } else if (type == "Prepend" && string_of(node, "prepend", "Prepend") == kSpaceMarker) {
    pipeline.prefix_space = true;
  } else if (type == "Replace" && member(node, "pattern", "Replace").value("String", "") == " " &&
             string_of(node, "content", "Replace") == kSpaceMarker) {
    pipeline.spaces_replaced = true;
  } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    // One form per pipeline: two in a row would need composing them, which no known
    // tokenizer.json does.
    if (pipeline.normalization != UnicodeNormalization::None) {
      refuse("unsupported: more than one Unicode normalization in the normalizer");
    }
    // Sluice normalizes before the space handling; a compatibility form after Replace(" ")
    // would see U+00A0 become a space that the Replace no longer turns into "▁".
    if ((type == "NFKC" || type == "NFKD") && pipeline.spaces_replaced) {
      refuse("unsupported normalizer ", type, " after Replace(\" \" → \"▁\")");
    }
    pipeline.normalization = type == "NFC"    ? UnicodeNormalization::NFC
                             : type == "NFD"  ? UnicodeNormalization::NFD
                             : type == "NFKC" ? UnicodeNormalization::NFKC
                                              : UnicodeNormalization::NFKD;
  } else {
    refuse("unsupported normalizer '", type, "' (", node.dump().substr(0, 120), ")");
  }
}

void Mapper::add_split(const Json& node, Pipeline& pipeline) const {
  const Json& pattern = member(node, "pattern", "Split");
  const std::string behavior = string_of(node, "behavior", "Split");
  std::string regex;
  if (pattern.contains("Regex") && pattern.at("Regex").is_string()) {
    regex = pattern.at("Regex").get<std::string>();
  } else if (pattern.contains("String") && pattern.at("String").is_string()) {
    const std::string literal = pattern.at("String").get<std::string>();
    // Gemma's Split(" ") runs after the normalizer has turned every space into U+2581, so it
    // never matches: nothing to do.
    if (pipeline.spaces_replaced && literal == " ") return;
    regex = regex_escape(literal);
  } else {
    refuse("Split: pattern is neither Regex nor String");
  }
  if (flag(node, "invert", false)) refuse("unsupported pre_tokenizer Split with invert=true");
  if (behavior != "Isolated") {
    refuse("unsupported pre_tokenizer Split behavior '", behavior, "' (only Isolated maps)");
  }
  pipeline.regexes.push_back(std::move(regex));
}

void Mapper::add_metaspace(const Json& node, Pipeline& pipeline) const {
  if (node.value("replacement", std::string(kSpaceMarker)) != kSpaceMarker) {
    refuse("unsupported Metaspace replacement (only U+2581 maps)");
  }
  if (flag(node, "split", false)) refuse("unsupported pre_tokenizer Metaspace with split=true");
  pipeline.metaspace = true;
  std::string scheme = node.value("prepend_scheme", std::string());
  if (scheme.empty()) scheme = flag(node, "add_prefix_space", true) ? "always" : "never";
  if (scheme == "always" || scheme == "first") {
    pipeline.prefix_space = true;
  } else if (scheme != "never") {
    refuse("unsupported Metaspace prepend_scheme '", scheme, "'");
  }
}

void Mapper::add_pre_tokenizer(const Json& node, Pipeline& pipeline) const {
  if (node.is_null()) return;
  const std::string type = string_of(node, "type", "pre_tokenizer");
  if (type == "Sequence") {
    for (const Json& child : member(node, "pretokenizers", "pre_tokenizer Sequence")) {
      add_pre_tokenizer(child, pipeline);
    }
  } else if (type == "Split") {
    add_split(node, pipeline);
  } else if (type == "Digits") {
    pipeline.regexes.push_back(flag(node, "individual_digits", false) ? "\\p{N}" : "\\p{N}+");
  } else if (type == "Punctuation") {
    if (node.value("behavior", std::string("Isolated")) != "Isolated") {
      refuse("unsupported pre_tokenizer Punctuation behavior (only Isolated maps)");
    }
    // Rust's is_ascii_punctuation (which takes in $+<=>^`|~) or a Unicode P* category.
    pipeline.regexes.push_back("[\\p{P}!-/:-@\\[-`{-~]");
  } else if (type == "ByteLevel") {
    if (flag(node, "add_prefix_space", false)) {
      refuse("unsupported pre_tokenizer ByteLevel with add_prefix_space=true");
    }
    pipeline.byte_level = true;
    if (flag(node, "use_regex", true)) pipeline.regexes.emplace_back(kGpt2Pattern);
  } else if (type == "Metaspace") {
    add_metaspace(node, pipeline);
  } else {
    refuse("unsupported pre_tokenizer '", type, "'");
  }
}

// A token named in tokenizer_config.json: a string, {"content": …}, or null.
std::optional<std::string> config_token(const Json& config, const char* key) {
  if (!config.is_object() || !config.contains(key)) return std::nullopt;
  const Json& value = config.at(key);
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value.at("content").is_string()) {
    return value.at("content").get<std::string>();
  }
  return std::nullopt;
}

struct Vocabulary {
  std::unordered_map<std::string, TokenId> by_text;
  std::optional<TokenId> find(const std::optional<std::string>& text) const {
    if (!text) return std::nullopt;
    auto it = by_text.find(*text);
    if (it == by_text.end()) return std::nullopt;
    return it->second;
  }
};

bool is_byte_piece(const std::string& text) {
  return text.size() == 6 && text.starts_with("<0x") && text.back() == '>' &&
         std::isxdigit(static_cast<unsigned char>(text[3])) &&
         std::isxdigit(static_cast<unsigned char>(text[4]));
}

// Ids never named by the vocab or the added tokens still need a unique, unmatchable text.
std::string hole_text(size_t id) {
  return "<sluice:hole:" + std::to_string(id) + ">";
}

void fill_vocab(const Mapper& mapper, const Json& model, const Json& added, TokenizerSpec& spec,
                Vocabulary& vocabulary) {
  const Json& vocab = mapper.member(model, "vocab", "model");
  if (!vocab.is_object()) mapper.refuse("model.vocab: expected an object of token → id");
  int64_t max_id = -1;
  for (const auto& [text, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      mapper.refuse("model.vocab['", text, "']: bad id");
    }
    max_id = std::max(max_id, id.get<int64_t>());
  }
  for (const Json& token : added) max_id = std::max(max_id, token.value("id", int64_t{-1}));
  spec.tokens.assign(static_cast<size_t>(max_id + 1), std::string());
  spec.types.assign(spec.tokens.size(), TokenType::Undefined);
  for (const auto& [text, id] : vocab.items()) {
    spec.tokens[id.get<size_t>()] = text;
    spec.types[id.get<size_t>()] = TokenType::Normal;
  }
  for (const Json& token : added) {
    const int64_t id = token.value("id", int64_t{-1});
    if (id < 0 || !token.contains("content"))
      mapper.refuse("added_tokens: entry without id/content");
    spec.tokens[id] = token.at("content").get<std::string>();
    spec.types[id] = token.value("special", false) ? TokenType::Control : TokenType::UserDefined;
    if (mapper.flag(token, "lstrip", false)) spec.lstrip_ids.push_back(static_cast<TokenId>(id));
    if (mapper.flag(token, "rstrip", false)) spec.rstrip_ids.push_back(static_cast<TokenId>(id));
  }
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    if (spec.types[id] == TokenType::Undefined) {
      spec.tokens[id] = hole_text(id);
      spec.types[id] = TokenType::Unused;
    }
    vocabulary.by_text.emplace(spec.tokens[id], static_cast<TokenId>(id));
  }
}

void fill_merges(const Mapper& mapper, const Json& model, TokenizerSpec& spec) {
  const Json& merges = mapper.member(model, "merges", "model");
  spec.merges.reserve(merges.size());
  for (const Json& merge : merges) {
    if (merge.is_string()) {
      spec.merges.push_back(merge.get<std::string>());
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      const std::string left = merge[0].get<std::string>(), right = merge[1].get<std::string>();
      // "a b" cannot say where a side that holds a space ends.
      if (left.find(' ') != std::string::npos) mapper.refuse("merge with a space in its left side");
      spec.merges.push_back(left + " " + right);
    } else {
      mapper.refuse("model.merges: an entry is neither \"a b\" nor [a, b]");
    }
  }
}

// Added tokens with `normalized: true` and the normalizer's output for each (tokenizer_spec.h
// NormalizedAddedToken). tokenizers normalizes the token content with the whole normalizer
// (none: the content itself, but still matched after the others); the spec's share of it is
// the Unicode form, then for SentencePiece the Prepend("▁") and the Replace(" " → "▁"). A
// Metaspace pre-tokenizer adds its "▁" only after the added tokens are matched, which the
// SentencePiece model cannot split from its own space handling: there normalized tokens are
// matched in the raw text together with the others (which differs from tokenizers only where
// a normalized and a non-normalized token overlap).
void read_normalized_added(const Mapper& mapper, const Json& added, const Pipeline& pipeline,
                           TokenizerSpec& spec) {
  if (pipeline.metaspace) return;
  const bool sentencepiece = spec.kind == TokenizerKind::SentencePiece;
  for (const Json& token : added) {
    if (!mapper.flag(token, "normalized", false)) continue;
    const auto id = static_cast<TokenId>(token.at("id").get<int64_t>());
    std::string form = normalize_unicode(spec.tokens[id], pipeline.normalization);
    if (form.empty()) continue;
    if (sentencepiece && pipeline.prefix_space) form.insert(0, kSpaceMarker);
    if (sentencepiece && pipeline.spaces_replaced) {
      for (size_t at = form.find(' '); at != std::string::npos; at = form.find(' ', at)) {
        form.replace(at, 1, kSpaceMarker);
      }
    }
    spec.normalized_added.push_back(NormalizedAddedToken{id, std::move(form)});
  }
}

// TemplateProcessing "single": special tokens before $A are BOS, after it EOS.
void read_post_processor(const Mapper& mapper, const Json& node, TokenizerSpec& spec,
                         const Vocabulary& vocabulary) {
  if (node.is_null()) return;
  const std::string type = mapper.string_of(node, "type", "post_processor");
  if (type == "Sequence") {
    for (const Json& child : mapper.member(node, "processors", "post_processor Sequence")) {
      read_post_processor(mapper, child, spec, vocabulary);
    }
    return;
  }
  if (type == "ByteLevel") return;  // offsets only
  if (type != "TemplateProcessing") mapper.refuse("unsupported post_processor '", type, "'");
  std::vector<TokenId> before, after;
  bool seen_sequence = false;
  for (const Json& item : mapper.member(node, "single", "TemplateProcessing")) {
    if (item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    const std::string name =
        mapper.string_of(mapper.member(item, "SpecialToken", "single"), "id", "SpecialToken");
    const Json& entry = mapper.member(mapper.member(node, "special_tokens", "TemplateProcessing"),
                                      name.c_str(), "special_tokens");
    for (const Json& id : mapper.member(entry, "ids", "special_tokens")) {
      (seen_sequence ? after : before).push_back(id.get<TokenId>());
    }
  }
  if (before.size() > 1 || after.size() > 1) {
    mapper.refuse("unsupported TemplateProcessing with more than one token before or after $A");
  }
  if (!before.empty()) {
    spec.add_bos = true;
    spec.bos = before[0];
  }
  if (!after.empty()) {
    if (spec.eos && *spec.eos != after[0]) {
      mapper.refuse("unsupported TemplateProcessing: appends id ", after[0], ", not EOS ",
                    *spec.eos);
    }
    spec.add_eos = true;
    spec.eos = after[0];
  }
  (void)vocabulary;
}

std::string chat_template_from_config(const Json& config) {
  if (!config.is_object() || !config.contains("chat_template")) return {};
  const Json& value = config.at("chat_template");
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array()) {  // [{"name": "default", "template": …}, {"name": "tool_use", …}]
    for (const Json& entry : value) {
      if (entry.value("name", "") == "default") return entry.value("template", "");
    }
  }
  return {};
}

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("tokenizer: cannot open ", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail("tokenizer: cannot read ", path.string());
  return text.str();
}

}  // namespace

TokenizerSpec hf_tokenizer_spec_from_json(std::string_view tokenizer_json,
                                          std::string_view config_json,
                                          std::string_view chat_template, std::string_view source) {
  const Mapper mapper(source);
  Json root, config;
  try {
    root = Json::parse(tokenizer_json);
    if (!config_json.empty()) config = Json::parse(config_json);
  } catch (const Json::exception& e) {
    mapper.refuse("not valid JSON: ", e.what());
  }
  const Json& model = mapper.member(root, "model", "top level");
  const std::string model_type = model.value("type", model.contains("merges") ? "BPE" : "");
  if (model_type != "BPE")
    mapper.refuse("unsupported model type '", model_type, "' (only BPE maps)");
  if (!model.value("continuing_subword_prefix", Json()).is_null() &&
      !model.at("continuing_subword_prefix").get<std::string>().empty()) {
    mapper.refuse("unsupported BPE continuing_subword_prefix");
  }
  if (!model.value("end_of_word_suffix", Json()).is_null() &&
      !model.at("end_of_word_suffix").get<std::string>().empty()) {
    mapper.refuse("unsupported BPE end_of_word_suffix");
  }
  if (model.contains("dropout") && !model.at("dropout").is_null() && model.at("dropout") != 0) {
    mapper.refuse("unsupported BPE dropout (sampled tokenization)");
  }

  Pipeline pipeline;
  mapper.add_normalizer(root.value("normalizer", Json()), pipeline);
  mapper.add_pre_tokenizer(root.value("pre_tokenizer", Json()), pipeline);
  const bool byte_fallback = mapper.flag(model, "byte_fallback", false);

  TokenizerSpec spec;
  Vocabulary vocabulary;
  const Json added = root.value("added_tokens", Json::array());
  fill_vocab(mapper, model, added, spec, vocabulary);
  fill_merges(mapper, model, spec);
  spec.ignore_merges = mapper.flag(model, "ignore_merges", false);
  spec.normalization = pipeline.normalization;

  if (pipeline.byte_level) {
    if (byte_fallback || pipeline.metaspace || pipeline.spaces_replaced) {
      mapper.refuse("unsupported mix of ByteLevel with SentencePiece-style whitespace");
    }
    spec.kind = TokenizerKind::BytePairByteLevel;
    spec.pre_regexes = pipeline.regexes;
    spec.pre_name = "tokenizer.json";
  } else if (byte_fallback || pipeline.metaspace || pipeline.spaces_replaced) {
    if (!pipeline.regexes.empty()) {
      mapper.refuse("unsupported pre-tokenizer split on a SentencePiece-style BPE");
    }
    spec.kind = TokenizerKind::SentencePiece;
    spec.add_space_prefix = pipeline.prefix_space;
    spec.escape_whitespaces = true;
    // No scores: the SentencePiece model then merges by rank, exactly as tokenizers' BPE does.
    for (size_t id = 0; id < spec.tokens.size(); ++id) {
      if (byte_fallback && spec.types[id] == TokenType::Normal && is_byte_piece(spec.tokens[id])) {
        spec.types[id] = TokenType::Byte;
      }
    }
  } else {
    mapper.refuse(
        "unsupported BPE pipeline: neither a ByteLevel pre-tokenizer nor "
        "SentencePiece-style whitespace (Metaspace, Replace \" \"→\"▁\", byte_fallback)");
  }

  // tokenizers' AddedVocabulary: one leftmost-longest scan over the raw text for the tokens
  // not marked normalized, then one over each normalized piece for those that are.
  spec.added_token_match = AddedTokenMatch::LeftmostLongest;
  read_normalized_added(mapper, added, pipeline, spec);

  if (model.contains("unk_token") && model.at("unk_token").is_string()) {
    spec.unk = vocabulary.find(model.at("unk_token").get<std::string>());
    if (spec.unk) spec.types[*spec.unk] = TokenType::Unknown;
  }
  spec.bos = vocabulary.find(config_token(config, "bos_token"));
  spec.eos = vocabulary.find(config_token(config, "eos_token"));
  spec.pad = vocabulary.find(config_token(config, "pad_token"));
  spec.sep = vocabulary.find(config_token(config, "sep_token"));
  spec.mask = vocabulary.find(config_token(config, "mask_token"));
  if (auto unk = vocabulary.find(config_token(config, "unk_token"))) spec.unk = unk;
  read_post_processor(mapper, root.value("post_processor", Json()), spec, vocabulary);
  // Decoding as transformers does it: its cleanup follows the config (tokenizers' own decode
  // never cleans up).
  spec.clean_spaces = mapper.flag(config, "clean_up_tokenization_spaces", false);
  spec.chat_template =
      chat_template.empty() ? chat_template_from_config(config) : std::string(chat_template);
  derive_special_token_roles(spec);
  return spec;
}

TokenizerSpec load_hf_tokenizer_spec(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path file = path;
  std::error_code error;
  if (fs::is_directory(file, error)) file /= "tokenizer.json";
  if (!fs::is_regular_file(file, error)) fail("tokenizer: ", file.string(), ": no such file");
  const fs::path dir = file.parent_path();
  const fs::path config_path = dir / "tokenizer_config.json";
  const fs::path template_path = dir / "chat_template.jinja";
  const std::string config =
      fs::is_regular_file(config_path, error) ? read_text_file(config_path) : std::string();
  const std::string chat_template =
      fs::is_regular_file(template_path, error) ? read_text_file(template_path) : std::string();
  return hf_tokenizer_spec_from_json(read_text_file(file), config, chat_template, file.string());
}

}  // namespace sluice::text
