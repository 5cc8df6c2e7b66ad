// TextTokenizer: text <-> token ids through the public API, loaded from a model file (GGUF
// tokenizer.ggml.* metadata; a safetensors snapshot's tokenizer.json) or a Hugging Face
// tokenizer.json directly. The CLI and the server use this alone; which algorithm runs and how
// the spec was read stay behind the pimpl.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sluice {

class TextTokenizer {
 public:
  // A GGUF file, or a safetensors file / snapshot directory with a tokenizer.json beside it.
  static TextTokenizer from_model_file(const std::string& path);
  // A tokenizer.json file (or the directory holding it); tokenizer_config.json and
  // chat_template.jinja from the same directory are used when present.
  static TextTokenizer from_tokenizer_json(const std::string& path);

  ~TextTokenizer();
  TextTokenizer(TextTokenizer&&) noexcept;
  TextTokenizer& operator=(TextTokenizer&&) noexcept;

  // parse_special: control and user-defined token texts in `text` become their ids (as
  // Hugging Face always does); off, only user-defined (non-special added) tokens are matched,
  // as in llama.cpp. add_special: BOS/EOS as the tokenizer's add_bos/add_eos say. `text` is
  // bytes: invalid UTF-8 is tokenized, never refused.
  std::vector<int32_t> encode(std::string_view text, bool parse_special = false,
                              bool add_special = false) const;
  // The bytes the ids stand for (may hold an incomplete UTF-8 sequence at either end when the
  // ids are a slice). skip_special drops control tokens (BOS, EOS, <|im_start|> …). An id
  // outside the vocabulary is a sluice::Error.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  size_t n_vocab() const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  bool is_end_of_generation(int32_t id) const;
  const std::string& token_text(int32_t id) const;  // as stored (byte-level chars, U+2581)
  const std::string& chat_template() const;         // empty when the source has none

  // The implementation, for the engine inside the library (opaque outside it).
  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit TextTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice
