// make_segment_model: picks the SegmentModel implementation for a TokenizerSpec's kind. The
// implementations live one per file (byte_level_bpe.cpp, sentencepiece*.cpp, wordpiece*.cpp,
// unigram*.cpp); this file knows only which factory serves which kind.
#include "text/tokenizer/segment_model.h"

#include "core/error.h"

namespace sluice::text {

std::unique_ptr<SegmentModel> make_segment_model(const TokenizerSpec& spec) {
  switch (spec.kind) {
    case TokenizerKind::BytePairByteLevel:
      return make_byte_level_bpe(spec);
    case TokenizerKind::SentencePiece:
      return make_sentencepiece(spec);
    case TokenizerKind::WordPiece:
      return make_wordpiece(spec);
    case TokenizerKind::Unigram:
      return make_unigram(spec);
  }
  fail("tokenizer: unsupported tokenizer kind ", static_cast<int>(spec.kind));
}

}  // namespace sluice::text
