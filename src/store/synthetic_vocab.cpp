// The vocabulary: bytes, then fillers that are real merges (pairs of byte characters, then a
// pair plus a byte character), so the merges list is valid for both llama.cpp, which requires
// one, and Sluice's BPE; control tokens last, where Qwen keeps them.
#include "store/synthetic_vocab.h"

#include "core/error.h"

namespace sluice {
namespace {

constexpr uint32_t kBytes = 256;
constexpr const char* kControlTokens[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
constexpr uint32_t kControls = sizeof(kControlTokens) / sizeof(kControlTokens[0]);

std::string utf8(uint32_t code_point) {
  std::string out;
  if (code_point < 0x80) {
    out += char(code_point);
  } else {  // byte-level characters stay below U+0800
    out += char(0xc0 | (code_point >> 6));
    out += char(0x80 | (code_point & 0x3f));
  }
  return out;
}

// GPT-2's bytes_to_unicode, in its order: printable bytes stand for themselves, the other 68
// become U+0100 onwards. Token i is the i-th of these, as in Qwen's vocabulary (220 is "Ġ").
std::vector<std::string> byte_characters() {
  std::vector<std::string> characters;
  std::vector<bool> printable(kBytes, false);
  for (uint32_t b = 0; b < kBytes; ++b) {
    printable[b] = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    if (printable[b]) characters.push_back(utf8(b));
  }
  uint32_t next = 0;
  for (uint32_t b = 0; b < kBytes; ++b) {
    if (!printable[b]) characters.push_back(utf8(kBytes + next++));
  }
  return characters;
}

constexpr const char* kChatMl =
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

}  // namespace

SyntheticVocab make_synthetic_vocab(uint32_t n_vocab) {
  if (n_vocab < kBytes + kControls) {
    fail("synth: a vocabulary needs at least ", kBytes + kControls, " tokens (got ", n_vocab, ")");
  }
  const uint64_t n_fillers = n_vocab - kBytes - kControls;
  constexpr uint64_t kPairs = uint64_t{kBytes} * kBytes;
  if (n_fillers > kPairs * (1 + kBytes)) fail("synth: vocabulary of ", n_vocab, " is too large");

  SyntheticVocab vocab;
  vocab.tokens = byte_characters();
  vocab.tokens.reserve(n_vocab);
  vocab.merges.reserve(n_fillers);
  for (uint64_t k = 0; k < n_fillers; ++k) {
    // Pairs of characters first; after them, pair k / 256 (token 256 + k / 256) plus a
    // character. Every string is new: two code points, then three.
    const std::string left =
        k < kPairs ? vocab.tokens[k / kBytes] : vocab.tokens[kBytes + (k - kPairs) / kBytes];
    const std::string right = vocab.tokens[k % kBytes];
    vocab.merges.push_back(left + " " + right);
    vocab.tokens.push_back(left + right);
  }
  vocab.types.assign(n_vocab, 1);
  for (uint32_t i = 0; i < kControls; ++i) {
    vocab.types[vocab.tokens.size()] = 3;
    vocab.tokens.push_back(kControlTokens[i]);
  }
  vocab.bos = vocab.pad = n_vocab - kControls;
  vocab.eos = n_vocab - 1;
  vocab.chat_template = kChatMl;
  return vocab;
}

}  // namespace sluice
