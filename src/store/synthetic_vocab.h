// A synthetic byte-level BPE vocabulary (tokenizer.ggml.model "gpt2") of any size from 259 up:
// the 256 GPT-2 byte characters in Qwen's order, filler tokens each made by one merge, then the
// ChatML control tokens. Every text tokenizes; the ids mean nothing. Knows no file format.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sluice {

struct SyntheticVocab {
  std::vector<std::string> tokens;  // [n_vocab]
  std::vector<int32_t> types;       // [n_vocab] GGUF token types: 1 normal, 3 control
  std::vector<std::string> merges;  // "left right", one per filler token, in rank order
  uint32_t bos = 0;                 // <|endoftext|>, as in Qwen's files
  uint32_t eos = 0;                 // <|im_end|>
  uint32_t pad = 0;                 // <|endoftext|>
  std::string chat_template;        // ChatML
};

// Throws sluice::Error when n_vocab is too small for the byte characters and control tokens.
SyntheticVocab make_synthetic_vocab(uint32_t n_vocab);

}  // namespace sluice
