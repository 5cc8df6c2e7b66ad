// sluice::TextTokenizer (include/sluice/tokenizer.h): the public face of text::Tokenizer. Picks
// the spec adapter by source and checks ids at the boundary; the tokenizer itself trusts them.
#include <utility>

#include "core/error.h"
#include "runtime/text_tokenizer_impl.h"
#include "runtime/tokenizer_from_model_file.h"
#include "sluice/tokenizer.h"
#include "text/tokenizer/hf_tokenizer_json.h"
#include "text/tokenizer/tokenizer.h"

namespace sluice {

TextTokenizer::TextTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TextTokenizer::~TextTokenizer() = default;
TextTokenizer::TextTokenizer(TextTokenizer&&) noexcept = default;
TextTokenizer& TextTokenizer::operator=(TextTokenizer&&) noexcept = default;

TextTokenizer TextTokenizer::from_model_file(const std::string& path) {
  return TextTokenizer(std::make_unique<Impl>(tokenizer_spec_from_model_path(path)));
}

TextTokenizer TextTokenizer::from_tokenizer_json(const std::string& path) {
  return TextTokenizer(std::make_unique<Impl>(text::load_hf_tokenizer_spec(path)));
}

std::vector<int32_t> TextTokenizer::encode(std::string_view text, bool parse_special,
                                           bool add_special) const {
  text::EncodeOptions options;
  options.parse_special = parse_special;
  options.add_special = add_special;
  return impl_->tokenizer.encode(text, options);
}

std::string TextTokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  for (int32_t id : ids) impl_->check_id(id);
  text::DecodeOptions options;
  options.skip_special = skip_special;
  return impl_->tokenizer.decode(ids, options);
}

size_t TextTokenizer::n_vocab() const {
  return impl_->tokenizer.n_vocab();
}

std::optional<int32_t> TextTokenizer::bos_id() const {
  return impl_->tokenizer.spec().bos;
}

std::optional<int32_t> TextTokenizer::eos_id() const {
  return impl_->tokenizer.spec().eos;
}

bool TextTokenizer::is_end_of_generation(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < n_vocab() &&
         impl_->tokenizer.is_end_of_generation(id);
}

const std::string& TextTokenizer::token_text(int32_t id) const {
  impl_->check_id(id);
  return impl_->tokenizer.spec().tokens[static_cast<size_t>(id)];
}

const std::string& TextTokenizer::chat_template() const {
  return impl_->tokenizer.spec().chat_template;
}

}  // namespace sluice
