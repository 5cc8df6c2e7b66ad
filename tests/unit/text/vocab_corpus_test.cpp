// Byte-level BPE against llama.cpp's tokenizer corpus: for every gpt2-model vocab GGUF in
// testdata/vocab with an .inp/.out pair (ids made by Hugging Face tokenizers), the spec is built
// by the production GGUF adapter, every text is encoded as llama.cpp's test-tokenizer-0 does
// (add_special and parse_special off) and the ids must match exactly; decoding the ids must
// give the text back byte for byte (with clean-up off, which is what changes text on purpose).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "format/gguf/gguf_reader.h"
#include "runtime/tokenizer_from_model_file.h"
#include "text/tokenizer/hf_tokenizer_json.h"
#include "text/tokenizer/tokenizer.h"
#include "unit/text/vocab_cases.h"

namespace sluice::text {
namespace {

namespace fs = std::filesystem;

const fs::path kVocabDir = fs::path(SLUICE_TESTDATA_DIR) / "vocab";
const fs::path kTokenizersDir = fs::path(SLUICE_TESTDATA_DIR) / "tokenizers";

using test_support::read_vocab_cases;
using test_support::show_ids;
using test_support::VocabCase;

// Encodes every text and compares with the expected ids; decodes the expected ids with
// clean-up off and compares with the text.
void check_corpus(const std::string& name, TokenizerSpec spec,
                  const std::vector<VocabCase>& cases) {
  ASSERT_EQ(spec.kind, TokenizerKind::BytePairByteLevel) << name;
  ASSERT_FALSE(cases.empty());
  const Tokenizer tokenizer(spec);
  spec.clean_spaces = false;
  const Tokenizer verbatim(std::move(spec));
  int mismatches = 0;
  for (const VocabCase& c : cases) {
    const std::vector<TokenId> ids = tokenizer.encode(c.text);
    if (ids != c.ids) ++mismatches;
    EXPECT_EQ(show_ids(ids), show_ids(c.ids)) << name << " text: '" << c.text << "'";
    EXPECT_EQ(verbatim.decode(c.ids), c.text) << name << " round trip of '" << c.text << "'";
  }
  EXPECT_EQ(mismatches, 0) << name << ": " << mismatches << " of " << cases.size() << " texts";
}

class VocabCorpus : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabCorpus, EncodesLikeHuggingFaceAndRoundTrips) {
  const std::string name = GetParam();
  const fs::path gguf = kVocabDir / ("ggml-vocab-" + name + ".gguf");
  const fs::path inp = fs::path(gguf.string() + ".inp");
  const fs::path out = fs::path(gguf.string() + ".out");
  if (!fs::exists(inp) || !fs::exists(out)) GTEST_SKIP() << "no .inp/.out for " << name;
  if (!fs::exists(gguf)) GTEST_SKIP() << gguf.filename() << " is absent (see vocab/README.md)";
  check_corpus(name, tokenizer_spec_from_gguf(read_gguf(gguf.string())),
               read_vocab_cases(inp, out));
}

// Corpora whose GGUF is absent but whose tokenizer is in testdata/tokenizers: Llama 3's
// tokenizer.json is Meta-Llama-3-8B's; Qwen3's BPE is Qwen1.5's and DeepSeek-R1-Distill-Qwen's
// (they differ only in added tokens, which these texts do not contain).
struct HfCorpus {
  std::string vocab;
  std::string tokenizer;
};

class VocabCorpusFromTokenizerJson : public ::testing::TestWithParam<HfCorpus> {};

TEST_P(VocabCorpusFromTokenizerJson, EncodesLikeHuggingFaceAndRoundTrips) {
  const HfCorpus& param = GetParam();
  const fs::path base = kVocabDir / ("ggml-vocab-" + param.vocab + ".gguf");
  const fs::path inp = fs::path(base.string() + ".inp");
  const fs::path out = fs::path(base.string() + ".out");
  const fs::path json = kTokenizersDir / param.tokenizer / "tokenizer.json";
  if (!fs::exists(inp) || !fs::exists(out)) GTEST_SKIP() << "no .inp/.out for " << param.vocab;
  if (!fs::exists(json)) GTEST_SKIP() << json << " is absent";
  check_corpus(param.vocab, load_hf_tokenizer_spec(json.string()), read_vocab_cases(inp, out));
}

INSTANTIATE_TEST_SUITE_P(ByteLevelBpe, VocabCorpusFromTokenizerJson,
                         ::testing::Values(HfCorpus{"llama-bpe", "llama3"},
                                           HfCorpus{"qwen2", "qwen3"},
                                           HfCorpus{"deepseek-r1-qwen", "qwen3"}),
                         [](const ::testing::TestParamInfo<HfCorpus>& info) {
                           std::string name = info.param.vocab;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

// Every byte-level (gpt2-model) vocabulary llama.cpp tests; the absent ones skip with a reason.
INSTANTIATE_TEST_SUITE_P(ByteLevelBpe, VocabCorpus,
                         ::testing::Values("gpt-2", "deepseek-coder", "deepseek-llm", "falcon",
                                           "mpt", "refact", "starcoder", "llama-bpe", "qwen2",
                                           "command-r", "chameleon", "deepseek-r1-qwen",
                                           "roberta-bpe"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace sluice::text
