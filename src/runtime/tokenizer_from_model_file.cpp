// tokenizer.ggml.* → TokenizerSpec, reproducing llama.cpp's vocabulary load: defaults per
// tokenizer.ggml.model, then the flags the pre-tokenizer name implies, then explicit keys, so a
// GGUF gives the ids llama.cpp gives. The key names are GGUF's (including its misspelled
// "seperator"); the defaults are llama.cpp's, because converters rely on them.
#include "runtime/tokenizer_from_model_file.h"

#include <filesystem>
#include <optional>
#include <unordered_set>
#include <variant>

#include "core/error.h"
#include "format/model_file_open.h"
#include "text/tokenizer/hf_tokenizer_json.h"
#include "text/tokenizer/pre_tokenizer.h"
#include "text/tokenizer/special_token_roles.h"

namespace sluice {
namespace {

using text::TokenId;
using text::TokenizerKind;
using text::TokenizerSpec;
using text::TokenType;

constexpr std::string_view kPrefix = "tokenizer.ggml.";

std::string key(std::string_view name) {
  return std::string(kPrefix) + std::string(name);
}

class Reader {
 public:
  explicit Reader(const ModelFile& file) : file_(file) {}

  template <class... Parts>
  [[noreturn]] void refuse(Parts&&... parts) const {
    fail("gguf: ", file_.display_name(), ": ", std::forward<Parts>(parts)...);
  }

  std::optional<std::string> string(std::string_view name) const {
    const MetaValue* value = file_.find(name);
    if (value == nullptr) return std::nullopt;
    if (const std::string* text = value->as_string()) return *text;
    refuse(name, ": expected a string, found ", meta_type_name(value->type()));
  }

  std::optional<bool> boolean(std::string_view name) const {
    const MetaValue* value = file_.find(name);
    if (value == nullptr) return std::nullopt;
    if (auto flag = value->as<bool>()) return flag;
    refuse(name, ": expected a bool, found ", meta_type_name(value->type()));
  }

  // Any integer scalar: converters disagree on u32 and i32 for token ids.
  std::optional<int64_t> integer(std::string_view name) const {
    const MetaValue* value = file_.find(name);
    if (value == nullptr) return std::nullopt;
    if (value->is_array() || value->type() == MetaType::STRING || value->type() == MetaType::F32 ||
        value->type() == MetaType::F64 || value->type() == MetaType::BOOL) {
      refuse(name, ": expected an integer, found ", meta_type_name(value->type()));
    }
    return std::visit(
        [](const auto& scalar) -> int64_t {
          using T = std::decay_t<decltype(scalar)>;
          if constexpr (std::is_integral_v<T>) return static_cast<int64_t>(scalar);
          return 0;
        },
        value->scalar_value());
  }

  const MetaValue* array(std::string_view name, MetaType element) const {
    const MetaValue* value = file_.find(name);
    if (value == nullptr) return nullptr;
    if (!value->is_array() || value->element_type() != element) {
      refuse(name, ": expected an array of ", meta_type_name(element));
    }
    return value;
  }

 private:
  const ModelFile& file_;
};

// llama.cpp's defaults for one tokenizer.ggml.model, before any key is read.
void apply_model_defaults(const Reader& reader, const std::string& model, TokenizerSpec& spec) {
  if (model == "llama") {
    spec.kind = TokenizerKind::SentencePiece;
    spec.bos = 1, spec.eos = 2, spec.unk = 0;
    spec.add_space_prefix = true, spec.add_bos = true;
  } else if (model == "gpt2") {
    spec.kind = TokenizerKind::BytePairByteLevel;
    spec.bos = 11, spec.eos = 11;
    spec.escape_whitespaces = false, spec.clean_spaces = true;
  } else if (model == "bert") {
    spec.kind = TokenizerKind::WordPiece;
    spec.bos = 101, spec.unk = 100, spec.sep = 102, spec.pad = 0, spec.mask = 103;
    spec.add_bos = true, spec.clean_spaces = true;
  } else if (model == "t5") {
    spec.kind = TokenizerKind::Unigram;
    spec.eos = 1, spec.unk = 2, spec.pad = 0;
    spec.add_eos = true;
  } else if (model == "no_vocab" || model == "none") {
    reader.refuse(key("model"), " is '", model, "': the file has no vocabulary");
  } else {
    reader.refuse("unknown tokenizer model '", model, "' (", key("model"),
                  "; known: llama, gpt2, bert, t5)");
  }
}

// The pre-tokenizer name's regexes and flags (byte-level BPE only; llama.cpp ignores the key
// for the other models).
void apply_pre_tokenizer(const Reader& reader, TokenizerSpec& spec) {
  spec.pre_name = reader.string(key("pre")).value_or("");
  if (spec.kind != TokenizerKind::BytePairByteLevel) return;
  const text::PreTokenizerInfo info = text::require_pre_tokenizer(spec.pre_name);
  spec.pre_regexes = info.regexes;
  spec.ignore_merges = info.ignore_merges;
  if (info.add_bos) spec.add_bos = true;
  spec.clean_spaces = info.clean_spaces;
  if (spec.pre_name == "glm4" || spec.pre_name == "chatglm-bpe") spec.bos.reset();
}

std::vector<TokenType> read_types(const Reader& reader, size_t n_tokens) {
  std::vector<TokenType> types(n_tokens, TokenType::Normal);
  const MetaValue* array = reader.array(key("token_type"), MetaType::I32);
  if (array == nullptr) return types;
  if (array->array_length() < n_tokens) {
    reader.refuse(key("token_type"), ": ", array->array_length(), " entries for ", n_tokens,
                  " tokens");
  }
  for (size_t i = 0; i < n_tokens; ++i) {
    const int64_t type = array->element_as_i64(i);
    types[i] = type >= 0 && type <= 6 ? static_cast<TokenType>(type) : TokenType::Undefined;
  }
  return types;
}

std::vector<float> read_scores(const Reader& reader, size_t n_tokens) {
  const MetaValue* value = reader.array(key("scores"), MetaType::F32);
  if (value == nullptr) return {};
  if (value->array_length() < n_tokens) {
    reader.refuse(key("scores"), ": ", value->array_length(), " scores for ", n_tokens, " tokens");
  }
  std::vector<float> scores = *value->array_as<float>();
  scores.resize(n_tokens);
  return scores;
}

void read_vocabulary(const Reader& reader, const std::string& model, TokenizerSpec& spec) {
  const MetaValue* tokens = reader.array(key("tokens"), MetaType::STRING);
  if (tokens == nullptr) reader.refuse(key("tokens"), " is missing");
  spec.tokens = *tokens->strings();
  std::unordered_set<std::string_view> seen;
  for (size_t i = 0; i < spec.tokens.size(); ++i) {
    // llama.cpp renames empty tokens so every text stays unique.
    if (spec.tokens[i].empty()) spec.tokens[i] = "[EMPTY_" + std::to_string(i) + "]";
  }
  for (size_t i = 0; i < spec.tokens.size(); ++i) {
    if (!seen.insert(spec.tokens[i]).second) {
      reader.refuse(key("tokens"), ": duplicate token '", spec.tokens[i], "' (id ", i, ")");
    }
  }
  spec.scores = read_scores(reader, spec.tokens.size());
  spec.types = read_types(reader, spec.tokens.size());
  if (spec.kind != TokenizerKind::BytePairByteLevel) return;
  const MetaValue* merges = reader.array(key("merges"), MetaType::STRING);
  if (merges != nullptr) {
    spec.merges = *merges->strings();
  } else if (spec.pre_name != "kimi-k2") {  // Kimi-K2 ranks pieces without merges
    reader.refuse(key("merges"), " is missing (needed by tokenizer model '", model, "')");
  }
}

// Special ids: defaults outside the vocabulary are disabled, explicit ids outside it are
// ignored (llama.cpp warns and keeps the default).
std::vector<TokenId> read_special_ids(const Reader& reader, TokenizerSpec& spec) {
  const int64_t n_vocab = static_cast<int64_t>(spec.tokens.size());
  const std::pair<const char*, std::optional<TokenId>*> roles[] = {
      {"bos_token_id", &spec.bos},     {"eos_token_id", &spec.eos},
      {"eot_token_id", &spec.eot},     {"eom_token_id", &spec.eom},
      {"unknown_token_id", &spec.unk}, {"seperator_token_id", &spec.sep},
      {"padding_token_id", &spec.pad}, {"mask_token_id", &spec.mask}};
  for (const auto& [name, id] : roles) {
    if (*id && (**id < 0 || **id >= n_vocab)) id->reset();
    const auto value = reader.integer(key(name));
    if (value && *value >= 0 && *value < n_vocab) *id = static_cast<TokenId>(*value);
  }
  // FIM pad/repo/separator ids stop generation too.
  std::vector<TokenId> stops;
  for (const char* name : {"fim_pad_token_id", "fim_rep_token_id", "fim_sep_token_id"}) {
    const auto value = reader.integer(key(name));
    if (value && *value >= 0 && *value < n_vocab) stops.push_back(static_cast<TokenId>(*value));
  }
  return stops;
}

void read_flags(const Reader& reader, TokenizerSpec& spec) {
  if (auto flag = reader.boolean(key("add_space_prefix"))) spec.add_space_prefix = *flag;
  if (auto flag = reader.boolean(key("remove_extra_whitespaces"))) {
    spec.remove_extra_whitespaces = *flag;
  }
  if (auto flag = reader.boolean(key("add_bos_token"))) spec.add_bos = *flag;
  if (auto flag = reader.boolean(key("add_eos_token"))) spec.add_eos = *flag;
  if (spec.add_bos && !spec.bos) {
    reader.refuse(key("add_bos_token"), " is true, but ", key("bos_token_id"), " is not set");
  }
  if (spec.add_eos && !spec.eos) {
    reader.refuse(key("add_eos_token"), " is true, but ", key("eos_token_id"), " is not set");
  }
}

bool is_gguf(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return false;
  char magic[4] = {};
  const size_t got = std::fread(magic, 1, sizeof(magic), file);
  std::fclose(file);
  return got == 4 && std::string_view(magic, 4) == "GGUF";
}

}  // namespace

text::TokenizerSpec tokenizer_spec_from_gguf(const ModelFile& file) {
  const Reader reader(file);
  const auto model = reader.string(key("model"));
  if (!model) reader.refuse("no tokenizer (", key("model"), " is missing)");
  TokenizerSpec spec;
  apply_model_defaults(reader, *model, spec);
  apply_pre_tokenizer(reader, spec);
  read_vocabulary(reader, *model, spec);
  text::RoleOptions roles;
  roles.llama_cpp_type_overrides = true;
  roles.extra_eog = read_special_ids(reader, spec);
  read_flags(reader, spec);
  spec.chat_template = reader.string("tokenizer.chat_template").value_or("");
  text::derive_special_token_roles(spec, roles);
  return spec;
}

text::TokenizerSpec tokenizer_spec_from_model_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::path where = path;
  if (fs::is_directory(where, error)) return text::load_hf_tokenizer_spec(path);
  if (!fs::exists(where, error)) fail("model: ", path, ": no such file or directory");
  if (is_gguf(path)) return tokenizer_spec_from_gguf(read_model_file(path));
  const fs::path beside = where.parent_path() / "tokenizer.json";
  if (where.extension() == ".safetensors" || where.extension() == ".json") {
    if (!fs::is_regular_file(beside, error)) {
      fail("model: ", path, ": no tokenizer.json beside it (", beside.string(), ")");
    }
    return text::load_hf_tokenizer_spec(beside.string());
  }
  fail("model: ", path, ": neither a GGUF file nor a safetensors file or snapshot directory");
}

}  // namespace sluice
