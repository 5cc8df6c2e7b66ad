// Tokenizer (tokenizer.h): spec validation, splitting special/added tokens out of the text (as
// llama.cpp's tokenizer_st_partition or tokenizers' AddedVocabulary does, per the spec's
// source), Unicode normalization of the plain text between them (Hugging Face normalizers),
// BOS/EOS, decoding with clean-up, and the streaming decoder. Everything kind-specific is
// delegated to the SegmentModel; this file knows no vocabulary format and no segmentation
// algorithm.
#include "text/tokenizer/tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "text/tokenizer/segment_model.h"
#include "text/tokenizer/special_token_splitter.h"
#include "text/tokenizer/unicode_normalization.h"
#include "text/tokenizer/utf8.h"

namespace sluice::text {
namespace {

void check_id(const TokenizerSpec& spec, const char* what, std::optional<TokenId> id) {
  if (id && (*id < 0 || static_cast<size_t>(*id) >= spec.tokens.size())) {
    fail("tokenizer: ", what, " id ", *id, " is out of range (n_vocab ", spec.tokens.size(), ")");
  }
}

void validate(TokenizerSpec& spec) {
  const size_t n = spec.tokens.size();
  if (n == 0) fail("tokenizer: the vocabulary is empty");
  if (n > static_cast<size_t>(INT32_MAX))
    fail("tokenizer: vocabulary of ", n, " tokens is too big");
  if (!spec.scores.empty() && spec.scores.size() != n) {
    fail("tokenizer: ", spec.scores.size(), " scores for ", n, " tokens");
  }
  if (spec.types.empty()) spec.types.assign(n, TokenType::Normal);
  if (spec.types.size() != n)
    fail("tokenizer: ", spec.types.size(), " token types for ", n, " tokens");
  check_id(spec, "bos", spec.bos);
  check_id(spec, "eos", spec.eos);
  check_id(spec, "eot", spec.eot);
  check_id(spec, "eom", spec.eom);
  check_id(spec, "unk", spec.unk);
  check_id(spec, "pad", spec.pad);
  check_id(spec, "sep", spec.sep);
  check_id(spec, "mask", spec.mask);
  for (const TokenId id : spec.eog) check_id(spec, "end-of-generation", id);
  for (const TokenId id : spec.lstrip_ids) check_id(spec, "lstrip", id);
  for (const TokenId id : spec.rstrip_ids) check_id(spec, "rstrip", id);
  for (const NormalizedAddedToken& token : spec.normalized_added) {
    check_id(spec, "normalized added token", token.id);
  }
  if (spec.add_bos && !spec.bos) fail("tokenizer: add_bos is set but there is no bos token");
  if (spec.add_eos && !spec.eos) fail("tokenizer: add_eos is set but there is no eos token");
}

// llama.cpp's clean_up_tokenization_spaces passes, in its order: " ?", " !", " .", " ," lose
// the space; " ' " becomes "'"; " 's", " 'm", " 're", " 've" lose the space.
std::string clean_spaces(const std::string& text) {
  std::string a;
  a.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char x = text[i];
    if (i > 0 && text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) a.pop_back();
    a += x;
  }
  std::string b;
  b.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const char x = a[i];
    if (i > 0 && x == '\'' && i + 1 < a.size() && a[i - 1] == ' ' && a[i + 1] == ' ') {
      b.pop_back();     // the space before
      a[i + 1] = '\0';  // the one after is consumed: it cannot open the next " ' " (llama.cpp)
      b += x;
      ++i;
      continue;
    }
    b += x;
  }
  std::string c;
  c.reserve(b.size());
  for (size_t i = 0; i < b.size(); ++i) {
    const char x = b[i];
    if (i > 0 && b[i - 1] == ' ' && x == '\'' && i + 1 < b.size()) {
      const char x1 = b[i + 1];
      const char x2 = i + 2 < b.size() ? b[i + 2] : '\0';
      if (x1 == 's' || x1 == 'm' || (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) {
        c.pop_back();
      }
    }
    c += x;
  }
  return c;
}

}  // namespace

struct Tokenizer::State {
  TokenizerSpec spec;
  std::unique_ptr<SegmentModel> model;
  SpecialTokenSplitter splitter;             // added tokens matched in the raw text
  SpecialTokenSplitter normalized_splitter;  // Hugging Face `normalized` ones, in normalized text
  std::vector<bool> eog;                     // [n_vocab]
  // [n_vocab] or empty: the bytes of a normalized added token whose form differs from its text
  // (decoded as the form, never skipped); empty strings elsewhere.
  std::vector<std::string> form_bytes;

  explicit State(TokenizerSpec s)
      : spec((validate(s), std::move(s))),
        model(make_segment_model(spec)),
        splitter(spec),
        normalized_splitter(SpecialTokenSplitter::for_normalized_tokens(spec)) {
    eog.assign(spec.tokens.size(), false);
    for (const TokenId id : spec.eog) eog[id] = true;
    for (const auto& id : {spec.eos, spec.eot, spec.eom}) {
      if (id) eog[*id] = true;
    }
    for (const NormalizedAddedToken& token : spec.normalized_added) {
      if (token.form.empty() || token.form == spec.tokens[token.id]) continue;
      if (form_bytes.empty()) form_bytes.resize(spec.tokens.size());
      form_bytes[token.id] = model->form_to_bytes(token.form);
    }
  }

  bool has_form(TokenId id) const { return !form_bytes.empty() && !form_bytes[id].empty(); }

  std::string piece(TokenId id) const {
    return has_form(id) ? form_bytes[id] : model->token_to_bytes(id);
  }

  // Plain text between raw-matched added tokens: normalized, normalized added tokens split
  // out of it, and the rest segmented.
  void encode_plain(std::string_view plain, const FragmentContext& context,
                    const EncodeOptions& options, std::vector<TokenId>& out) const;

  void check(TokenId id) const {
    if (id < 0 || static_cast<size_t>(id) >= spec.tokens.size()) {
      fail("tokenizer: token id ", id, " is out of range (n_vocab ", spec.tokens.size(), ")");
    }
  }

  bool skipped(TokenId id, const DecodeOptions& options) const {
    const TokenType type = spec.types[id];
    return options.skip_special && (type == TokenType::Control || type == TokenType::Unknown) &&
           !has_form(id);
  }
};

void Tokenizer::State::encode_plain(std::string_view plain, const FragmentContext& context,
                                    const EncodeOptions& options, std::vector<TokenId>& out) const {
  std::string repaired, normalized;
  if (spec.normalization != UnicodeNormalization::None) {
    // Hugging Face normalizes the text between added tokens, and only ever sees well-formed
    // text: invalid bytes are repaired first (as the byte-level model would), then normalized.
    if (!is_valid_utf8(plain)) {
      repaired = repair_utf8_per_byte(plain);
      plain = repaired;
    }
    normalized = normalize_unicode(plain, spec.normalization);
    plain = normalized;
  }
  if (normalized_splitter.empty()) {
    model->encode_fragment(plain, context, out);
    return;
  }
  // tokenizers' extract_and_normalize, second step: the normalizer runs over the whole piece
  // (so llama2's dummy prefix lands once, at its start), then the normalized tokens are cut
  // out of the normalized text and what is left is segmented as it stands.
  const std::string text = model->normalize_fragment(plain, context);
  for (const Fragment& piece : normalized_splitter.split(text, options.parse_special)) {
    if (piece.token >= 0) {
      out.push_back(piece.token);
    } else {
      model->encode_normalized(std::string_view(text).substr(piece.begin, piece.end - piece.begin),
                               out);
    }
  }
}

Tokenizer::Tokenizer(TokenizerSpec spec) : state_(std::make_unique<State>(std::move(spec))) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

std::vector<TokenId> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  const State& s = *state_;
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 4);
  if (options.add_special && s.spec.add_bos) out.push_back(*s.spec.bos);
  const std::vector<Fragment> fragments = s.splitter.split(text, options.parse_special);
  for (size_t i = 0; i < fragments.size(); ++i) {
    const Fragment& fragment = fragments[i];
    if (fragment.token >= 0) {
      out.push_back(fragment.token);
      continue;
    }
    FragmentContext context;
    context.at_text_start = i == 0;
    context.after_special = i > 0 && fragments[i - 1].token >= 0;
    s.encode_plain(text.substr(fragment.begin, fragment.end - fragment.begin), context, options,
                   out);
  }
  if (options.add_special && s.spec.add_eos) out.push_back(*s.spec.eos);
  return out;
}

std::string Tokenizer::decode(std::span<const TokenId> ids, const DecodeOptions& options) const {
  const State& s = *state_;
  std::string text;
  for (const TokenId id : ids) {
    s.check(id);
    if (!s.skipped(id, options)) text += s.piece(id);
  }
  s.model->finish_decode(text, true);
  if (s.spec.clean_spaces) text = clean_spaces(text);
  return text;
}

std::string Tokenizer::token_piece(TokenId id, const DecodeOptions& options) const {
  const State& s = *state_;
  s.check(id);
  if (s.skipped(id, options)) return {};
  return s.piece(id);
}

std::string Tokenizer::decode_piece(TokenId id, bool at_text_start,
                                    const DecodeOptions& options) const {
  std::string piece = token_piece(id, options);
  if (!piece.empty()) state_->model->finish_decode(piece, at_text_start);
  return piece;
}

const TokenizerSpec& Tokenizer::spec() const {
  return state_->spec;
}
size_t Tokenizer::n_vocab() const {
  return state_->spec.tokens.size();
}

bool Tokenizer::is_control(TokenId id) const {
  return id >= 0 && static_cast<size_t>(id) < n_vocab() &&
         state_->spec.types[id] == TokenType::Control;
}

bool Tokenizer::is_end_of_generation(TokenId id) const {
  return id >= 0 && static_cast<size_t>(id) < n_vocab() && state_->eog[id];
}

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, DecodeOptions options,
                                   bool at_text_start)
    : tokenizer_(&tokenizer), options_(options), first_(at_text_start) {}

std::string StreamingDecoder::push(TokenId id) {
  const std::string piece = tokenizer_->decode_piece(id, first_, options_);
  if (piece.empty()) return {};
  first_ = false;
  pending_ += piece;
  // Hold back only a sequence that may still complete; anything already invalid is replaced
  // now, so the output is always well-formed UTF-8.
  const size_t complete = utf8_complete_prefix(pending_);
  std::string out = repair_utf8_lossy(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return out;
}

std::string StreamingDecoder::flush() {
  std::string out = repair_utf8_lossy(pending_);
  pending_.clear();
  return out;
}

}  // namespace sluice::text
