// Unicode normalization (NFC, NFD, NFKC, NFKD) of tokenizer input, over ICU's Normalizer2.
// Hugging Face tokenizer.json files name these as their `normalizer` stage (Qwen3: NFC), and
// the ids only match the reference when the text is normalized the same way first.
#pragma once

#include <string>
#include <string_view>

#include "text/tokenizer/tokenizer_spec.h"

namespace sluice::text {

// `text` normalized to `form`. `text` should be well-formed UTF-8: callers repair it first, as
// what ICU makes of ill-formed bytes is not what any reference tokenizer does.
// UnicodeNormalization::None returns the text as is.
std::string normalize_unicode(std::string_view text, UnicodeNormalization form);

}  // namespace sluice::text
