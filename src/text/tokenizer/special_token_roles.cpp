// End-of-turn, end-of-message and end-of-generation ids derived from token texts, as llama.cpp
// does at vocabulary load (its name lists are reproduced as data). Converters have long left
// these roles out of metadata, so a model that stops on <|im_end|> would otherwise run on.
#include "text/tokenizer/special_token_roles.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string_view>
#include <unordered_map>

namespace sluice::text {
namespace {

// Texts llama.cpp takes as the end-of-turn token when metadata names none.
constexpr std::array<std::string_view, 11> kEotNames = {
    "<|eot_id|>",        "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|end_of_text|>",   "<EOT>",      "_<EOT>",  "[EOT]",         "<｜end▁of▁sentence｜>",
    "<end_of_utterance>"};

// FIM tokens llama.cpp also stops on (pad, repository, file separator).
constexpr std::array<std::string_view, 11> kFimStopNames = {
    "<|fim_pad|>",   "<fim-pad>",  "<fim_pad>", "<PAD>",      "[PAD]",       "<|fim_repo|>",
    "<|repo_name|>", "<fim-repo>", "<REPO>",    "<reponame>", "<|file_sep|>"};

// Every text llama.cpp puts in the end-of-generation set.
constexpr std::array<std::string_view, 22> kEogNames = {"<|eot_id|>",
                                                        "<|im_end|>",
                                                        "<|end|>",
                                                        "<|return|>",
                                                        "<|call|>",
                                                        "<|flush|>",
                                                        "<|calls|>",
                                                        "<end_of_turn>",
                                                        "<|endoftext|>",
                                                        "</s>",
                                                        "<|eom_id|>",
                                                        "<EOT>",
                                                        "_<EOT>",
                                                        "[EOT]",
                                                        "[EOS]",
                                                        "<|end_of_text|>",
                                                        "<end_of_utterance>",
                                                        "<eos>",
                                                        "<turn|>",
                                                        "<|tool_response>",
                                                        "<｜end▁of▁sentence｜>",
                                                        "[e~["};

// gpt-oss: llama.cpp renders these harmony markers as text rather than treating them as control.
constexpr std::array<std::string_view, 4> kHarmonyMarkers = {"<|channel|>", "<|message|>",
                                                             "<|start|>", "<|constrain|>"};

class Roles {
 public:
  Roles(TokenizerSpec& spec, bool overrides) : spec_(spec), overrides_(overrides) {
    for (size_t id = 0; id < spec.tokens.size(); ++id) {
      // The first id wins for a duplicated text, as in a vocabulary lookup.
      by_text_.emplace(spec.tokens[id], static_cast<TokenId>(id));
    }
  }

  std::optional<TokenId> find(std::string_view text) const {
    auto it = by_text_.find(std::string(text));
    if (it == by_text_.end()) return std::nullopt;
    return it->second;
  }

  // The lowest id among the named tokens: llama.cpp takes whichever its hash map yields first,
  // which is not reproducible; the lowest id is at least deterministic.
  template <size_t N>
  std::optional<TokenId> first_of(const std::array<std::string_view, N>& names) const {
    std::optional<TokenId> best;
    for (auto name : names) {
      auto id = find(name);
      if (id && (!best || *id < *best)) best = id;
    }
    return best;
  }

  void make_control(TokenId id) {
    if (!overrides_ || id < 0 || static_cast<size_t>(id) >= spec_.types.size()) return;
    spec_.types[id] = TokenType::Control;
  }

  void set_type(TokenId id, TokenType type) {
    if (!overrides_ || id < 0 || static_cast<size_t>(id) >= spec_.types.size()) return;
    spec_.types[id] = type;
  }

 private:
  TokenizerSpec& spec_;
  bool overrides_;
  std::unordered_map<std::string, TokenId> by_text_;
};

bool in_range(const TokenizerSpec& spec, std::optional<TokenId> id) {
  return id && *id >= 0 && static_cast<size_t>(*id) < spec.tokens.size();
}

// o200k_harmony (and solar-open) end a message with <|end|> but stop only on <|return|> or
// <|call|>: when both are present, <|end|> leaves the set, as llama.cpp does.
void drop_harmony_end(TokenizerSpec& spec, std::vector<TokenId>& eog, Roles& roles) {
  bool has_return = false, has_call = false, has_flush = false;
  std::optional<TokenId> end;
  for (TokenId id : eog) {
    const std::string& text = spec.tokens[id];
    if (text == "<|return|>") has_return = true;
    if (text == "<|call|>" || text == "<|calls|>") has_call = true;
    if (text == "<|flush|>") has_flush = true;
    if (text == "<|end|>") end = id;
  }
  if (end && has_call && (has_return || has_flush)) {
    std::erase(eog, *end);
    roles.set_type(*end, TokenType::UserDefined);
  }
}

// Gemma 4 uses </s> inside tool responses: with <|tool_response> present it is not a stop.
void drop_tool_response_close(TokenizerSpec& spec, std::vector<TokenId>& eog, Roles& roles) {
  bool has_tool_response = false;
  std::optional<TokenId> close;
  for (TokenId id : eog) {
    if (spec.tokens[id] == "<|tool_response>") has_tool_response = true;
    if (spec.tokens[id] == "</s>") close = id;
  }
  if (has_tool_response && close) {
    std::erase(eog, *close);
    roles.set_type(*close, TokenType::Normal);
  }
}

}  // namespace

void derive_special_token_roles(TokenizerSpec& spec, const RoleOptions& options) {
  Roles roles(spec, options.llama_cpp_type_overrides);
  if (!in_range(spec, spec.eot)) spec.eot = roles.first_of(kEotNames);
  if (spec.eot) roles.make_control(*spec.eot);
  if (!in_range(spec, spec.eom)) spec.eom = roles.find("<|eom_id|>");
  if (spec.eom) roles.make_control(*spec.eom);

  std::vector<TokenId> eog;
  for (TokenId id : options.extra_eog) {
    if (in_range(spec, id)) eog.push_back(id);
  }
  for (auto name : kFimStopNames) {
    if (auto id = roles.find(name)) {
      eog.push_back(*id);
      roles.make_control(*id);
    }
  }
  for (auto name : kEogNames) {
    if (auto id = roles.find(name)) {
      eog.push_back(*id);
      roles.make_control(*id);
    }
  }
  for (auto name : kHarmonyMarkers) {
    if (auto id = roles.find(name)) roles.set_type(*id, TokenType::UserDefined);
  }
  for (const auto& id : {spec.eos, spec.eot, spec.eom}) {
    if (in_range(spec, id)) eog.push_back(*id);
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  drop_harmony_end(spec, eog, roles);
  drop_tool_response_close(spec, eog, roles);
  spec.eog = std::move(eog);
}

}  // namespace sluice::text
