// Unicode normalization (unicode_normalization.h). ICU works on UTF-8 directly here
// (normalizeUTF8), so the common already-normalized text costs one quick check and no
// conversion to UTF-16.
#include "text/tokenizer/unicode_normalization.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>
#include <unicode/utypes.h>

#include <algorithm>
#include <cstdint>

#include "core/error.h"

namespace sluice::text {
namespace {

const char* form_name(UnicodeNormalization form) {
  switch (form) {
    case UnicodeNormalization::None:
      return "none";
    case UnicodeNormalization::NFC:
      return "NFC";
    case UnicodeNormalization::NFD:
      return "NFD";
    case UnicodeNormalization::NFKC:
      return "NFKC";
    case UnicodeNormalization::NFKD:
      return "NFKD";
  }
  return "?";
}

const icu::Normalizer2& normalizer_for(UnicodeNormalization form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = nullptr;
  switch (form) {
    case UnicodeNormalization::NFC:
      normalizer = icu::Normalizer2::getNFCInstance(status);
      break;
    case UnicodeNormalization::NFD:
      normalizer = icu::Normalizer2::getNFDInstance(status);
      break;
    case UnicodeNormalization::NFKC:
      normalizer = icu::Normalizer2::getNFKCInstance(status);
      break;
    case UnicodeNormalization::NFKD:
      normalizer = icu::Normalizer2::getNFKDInstance(status);
      break;
    case UnicodeNormalization::None:
      break;
  }
  if (U_FAILURE(status) || normalizer == nullptr) {
    fail("tokenizer: ICU has no ", form_name(form), " normalizer (", u_errorName(status), ")");
  }
  return *normalizer;
}

}  // namespace

std::string normalize_unicode(std::string_view text, UnicodeNormalization form) {
  if (form == UnicodeNormalization::None) return std::string(text);
  // Every normalization form leaves ASCII alone, and most tokenizer input is ASCII.
  if (std::all_of(text.begin(), text.end(), [](char c) { return (c & 0x80) == 0; })) {
    return std::string(text);
  }
  if (text.size() > static_cast<size_t>(INT32_MAX)) {
    fail("tokenizer: ", text.size(), " bytes of text are too many to normalize at once");
  }
  const icu::Normalizer2& normalizer = normalizer_for(form);
  const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  UErrorCode status = U_ZERO_ERROR;
  if (normalizer.isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return std::string(text);
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  icu::StringByteSink<std::string> sink(&out);
  status = U_ZERO_ERROR;
  normalizer.normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status)) {
    fail("tokenizer: ", form_name(form), " normalization failed (", u_errorName(status), ")");
  }
  return out;
}

}  // namespace sluice::text
