// TextTokenizer::Impl: the text::Tokenizer behind the public TextTokenizer, visible to the
// rest of runtime/ (the session streams generated text through its StreamingDecoder) and to
// nothing outside the library.
#pragma once

#include <utility>

#include "core/error.h"
#include "sluice/tokenizer.h"
#include "text/tokenizer/tokenizer.h"

namespace sluice {

struct TextTokenizer::Impl {
  explicit Impl(text::TokenizerSpec spec) : tokenizer(std::move(spec)) {}
  text::Tokenizer tokenizer;

  void check_id(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= tokenizer.n_vocab()) {
      fail("token id ", id, " is outside the vocabulary (", tokenizer.n_vocab(), " tokens)");
    }
  }
};

}  // namespace sluice
