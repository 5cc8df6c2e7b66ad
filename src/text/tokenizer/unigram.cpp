// Unigram (tokenizer.ggml.model "t5"): not supported yet. A faithful Unigram needs the
// SentencePiece normalizer's precompiled_charsmap, which TokenizerSpec does not carry, so the
// factory refuses the kind by name rather than tokenizing almost right.
#include "core/error.h"
#include "text/tokenizer/segment_model.h"

namespace sluice::text {

std::unique_ptr<SegmentModel> make_unigram(const TokenizerSpec& /*spec*/) {
  fail("unsupported tokenizer kind t5 (Unigram)");
}

}  // namespace sluice::text
