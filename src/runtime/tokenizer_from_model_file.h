// The GGUF adapter: tokenizer.ggml.* metadata → TokenizerSpec, with llama.cpp's per-model
// defaults (SPM adds BOS, BPE does not; BOS/EOS/UNK default ids; the flags each
// tokenizer.ggml.pre name implies) and its name-based end-of-generation rules. Also resolves a
// model path to its tokenizer source (GGUF metadata, or the tokenizer.json of a snapshot).
#pragma once

#include <string>

#include "format/model_file.h"
#include "text/tokenizer/tokenizer_spec.h"

namespace sluice {

// Throws sluice::Error naming the key: no tokenizer, unknown model or pre-tokenizer, arrays of
// the wrong type or length, duplicate tokens.
text::TokenizerSpec tokenizer_spec_from_gguf(const ModelFile& file);

// A GGUF file → its metadata; a directory, .safetensors file or .json index → the
// tokenizer.json in that directory.
text::TokenizerSpec tokenizer_spec_from_model_path(const std::string& path);

}  // namespace sluice
