// BERT normalization and pre-tokenization over ICU's Unicode tables. The order of the stages is
// Hugging Face's (BertNormalizer then BertPreTokenizer), which is the reference the WordPiece
// ids are checked against; llama.cpp's WPM preprocess approximates the same with its own
// tables (its "NFD" keeps only a code point's first decomposed character, and it lowercases
// by simple mapping), which agrees on everything but rare inputs such as a combining mark
// typed separately after its base letter.
#include "text/tokenizer/bert_normalizer.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/ustring.h>
#include <unicode/utypes.h>

#include <array>

#include "core/error.h"
#include "text/tokenizer/utf8.h"

namespace sluice::text {
namespace {

// Characters the cleaner removes: Hugging Face's is_control is "any Other category" (Cc, Cf,
// Co, Cs; its tables list no unassigned Cn) except the three whitespace controls, which become
// spaces instead. So a vertical tab or U+0085 disappears rather than separating words.
bool is_removed_control(UChar32 cp) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return false;
  switch (u_charType(cp)) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_PRIVATE_USE_CHAR:
    case U_SURROGATE:
      return true;
    default:
      return false;
  }
}

// Rust's char::is_whitespace: the Unicode White_Space property.
bool is_whitespace(UChar32 cp) {
  return u_hasBinaryProperty(cp, UCHAR_WHITE_SPACE) != 0;
}

// BertPreTokenizer's punctuation: every ASCII punctuation or symbol character ($, +, <, ^, `,
// |, ~ … included) and every Unicode P* character.
bool is_punctuation(UChar32 cp) {
  if (cp < 0x80) {
    return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
           (cp >= 0x7B && cp <= 0x7E);
  }
  return u_ispunct(cp) != 0;
}

// The CJK ideograph blocks BERT splits into one word per character, exactly as Hugging Face
// lists them (its Extension C/D boundary reads 0x2B920 where the block starts at 0x2B820; the
// reference is followed, as llama.cpp does too).
bool is_chinese_char(UChar32 cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// Full lowercase mapping of one character without context (Rust's char::to_lowercase): a
// lone capital sigma becomes σ, U+0130 becomes "i" + U+0307.
void append_lowercase(UChar32 cp, UChar32* out, int& n_out) {
  if (cp < 0x80) {
    out[0] = (cp >= 'A' && cp <= 'Z') ? cp + ('a' - 'A') : cp;
    n_out = 1;
    return;
  }
  std::array<UChar, 2> source{};
  int32_t source_length = 0;
  U16_APPEND_UNSAFE(source.data(), source_length, cp);
  std::array<UChar, 8> lowered{};
  UErrorCode status = U_ZERO_ERROR;
  const int32_t length = u_strToLower(lowered.data(), static_cast<int32_t>(lowered.size()),
                                      source.data(), source_length, "", &status);
  if (U_FAILURE(status) || length > static_cast<int32_t>(lowered.size())) {
    out[0] = u_tolower(cp);  // cannot happen: full mappings are at most three characters
    n_out = 1;
    return;
  }
  n_out = 0;
  for (int32_t i = 0; i < length;) {
    UChar32 c = 0;
    U16_NEXT(lowered.data(), i, length, c);
    out[n_out++] = c;
  }
}

// Stage 1 (BertNormalizer's clean_text and handle_chinese_chars): drop NUL, U+FFFD and
// controls, turn whitespace into a space, put spaces around CJK ideographs.
icu::UnicodeString clean(std::string_view text) {
  const std::string repaired = repair_utf8_per_byte(text);
  icu::UnicodeString cleaned;
  for (size_t pos = 0; pos < repaired.size();) {
    char32_t decoded = 0;
    const size_t length = decode_utf8(repaired, pos, decoded);
    pos += length == 0 ? 1 : length;  // repaired text is well-formed; be safe regardless
    const auto cp = static_cast<UChar32>(decoded);
    if (length == 0 || cp == 0 || cp == 0xFFFD || is_removed_control(cp)) continue;
    if (is_whitespace(cp)) {
      cleaned.append(static_cast<UChar32>(' '));
    } else if (is_chinese_char(cp)) {
      cleaned.append(static_cast<UChar32>(' ')).append(cp).append(static_cast<UChar32>(' '));
    } else {
      cleaned.append(cp);
    }
  }
  return cleaned;
}

class WordSplitter {
 public:
  void add(UChar32 cp) {
    if (is_whitespace(cp)) {
      finish();
    } else if (is_punctuation(cp)) {
      finish();
      append(cp);
      finish();
    } else {
      append(cp);
    }
  }
  std::vector<BertWord> take() {
    finish();
    return std::move(words_);
  }

 private:
  void append(UChar32 cp) {
    append_utf8(current_.text, static_cast<char32_t>(cp));
    ++current_.n_code_points;
  }
  void finish() {
    if (current_.n_code_points > 0) words_.push_back(std::move(current_));
    current_ = {};
  }

  std::vector<BertWord> words_;
  BertWord current_;
};

}  // namespace

std::vector<BertWord> bert_pre_tokenize(std::string_view text) {
  const icu::UnicodeString cleaned = clean(text);
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfd = icu::Normalizer2::getNFDInstance(status);
  if (U_FAILURE(status))
    fail("wordpiece tokenizer: ICU has no NFD normalizer: ", u_errorName(status));
  const icu::UnicodeString decomposed = nfd->normalize(cleaned, status);
  if (U_FAILURE(status))
    fail("wordpiece tokenizer: NFD normalization failed: ", u_errorName(status));

  // Stages 2 and 3 (strip_accents, lowercase) character by character, then the pre-tokenizer's
  // split of what they produce.
  WordSplitter splitter;
  for (int32_t i = 0; i < decomposed.length();) {
    const UChar32 cp = decomposed.char32At(i);
    i += U16_LENGTH(cp);
    if (u_charType(cp) == U_NON_SPACING_MARK) continue;
    std::array<UChar32, 8> lowered{};
    int n_lowered = 0;
    append_lowercase(cp, lowered.data(), n_lowered);
    for (int k = 0; k < n_lowered; ++k) splitter.add(lowered[k]);
  }
  return splitter.take();
}

}  // namespace sluice::text
