// GgufWriter: validation of what is added, then the v3 byte layout — header, key-values,
// tensor infos, padding to the alignment, tensor data each padded to the alignment.
#include "format/gguf/gguf_writer.h"

#include <algorithm>

#include "core/checked_math.h"
#include "core/error.h"
#include "format/gguf/gguf_constants.h"
#include "format/model_file.h"
#include "format/text_checks.h"
#include "io/output_file.h"

namespace sluice {
namespace {

template <class T>
void put(OutputFile& out, T value) {
  out.write(&value, sizeof(T));
}

void put_string(OutputFile& out, const std::string& text) {
  put<uint64_t>(out, text.size());
  out.write(text.data(), text.size());
}

void put_value(OutputFile& out, const MetaValue& value);

void put_array(OutputFile& out, const MetaValue& value) {
  put<uint32_t>(out, static_cast<uint32_t>(value.element_type()));
  put<uint64_t>(out, value.array_length());
  if (const auto* strings = value.strings()) {
    for (const auto& text : *strings) put_string(out, text);
  } else if (const auto* arrays = value.arrays()) {
    for (const auto& inner : *arrays) put_array(out, inner);
  } else {
    out.write(value.element_bytes());
  }
}

void put_value(OutputFile& out, const MetaValue& value) {
  if (value.is_array()) return put_array(out, value);
  if (const auto* text = value.as_string()) return put_string(out, *text);
  std::visit(
      [&](const auto& scalar) {
        using T = std::decay_t<decltype(scalar)>;
        if constexpr (std::is_same_v<T, bool>) {
          put<uint8_t>(out, scalar ? 1 : 0);
        } else if constexpr (std::is_arithmetic_v<T>) {
          put<T>(out, scalar);
        }
      },
      value.scalar_value());
}

uint64_t padding_to(uint64_t position, uint64_t alignment) {
  return (alignment - position % alignment) % alignment;
}

}  // namespace

void GgufWriter::set_alignment(uint32_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    fail("gguf writer: alignment is not a nonzero power of two (", kGgufAlignmentKey, ": ",
         alignment, ")");
  }
  alignment_ = alignment;
  for (auto& [key, value] : metadata_) {
    if (key == kGgufAlignmentKey) {
      value = MetaValue::scalar(alignment);
      return;
    }
  }
  metadata_.emplace_back(std::string(kGgufAlignmentKey), MetaValue::scalar(alignment));
}

void GgufWriter::add_metadata(std::string key, MetaValue value) {
  if (key.empty() || !is_valid_utf8(key)) {
    fail("gguf writer: metadata key is empty or not UTF-8 (key: ", printable(key), ")");
  }
  for (const auto& entry : metadata_) {
    if (entry.first == key) fail("gguf writer: duplicate metadata key (key: ", key, ")");
  }
  if (key == kGgufAlignmentKey) {
    auto alignment = value.as<uint32_t>();
    if (!alignment)
      fail("gguf writer: alignment must be a u32 (", key, ": ", meta_type_name(value.type()), ")");
    set_alignment(*alignment);
    return;
  }
  metadata_.emplace_back(std::move(key), std::move(value));
}

uint64_t GgufWriter::check_tensor(const std::string& name, QType type,
                                  const std::vector<uint64_t>& shape) const {
  if (name.empty() || !is_valid_utf8(name)) {
    fail("gguf writer: tensor name is empty or not UTF-8 (tensor: ", printable(name), ")");
  }
  for (const auto& tensor : tensors_) {
    if (tensor.name == name) fail("gguf writer: duplicate tensor name (tensor: ", name, ")");
  }
  const auto& traits = traits_of(type);
  if (!traits.in_gguf) fail("gguf writer: type not in GGUF (", name, ": ", traits.name, ")");
  if (shape.empty() || shape.size() > kMaxDims) {
    fail("gguf writer: tensor needs 1 to 4 dimensions (", name, ": ", shape.size(), ")");
  }
  uint64_t n_elements = 1;
  for (uint64_t dim : shape) {
    auto product = checked_mul(n_elements, dim);
    if (!product) fail("gguf writer: tensor element count overflows (", name, ")");
    n_elements = *product;
  }
  if (shape[0] % traits.block_size != 0) {
    fail("gguf writer: row length is not a multiple of the block size ", traits.block_size, " (",
         name, ": ", shape[0], ")");
  }
  return n_elements / traits.block_size * traits.block_bytes;
}

void GgufWriter::add_tensor(std::string name, QType type, std::vector<uint64_t> shape,
                            std::span<const uint8_t> bytes) {
  const uint64_t expected = check_tensor(name, type, shape);
  if (bytes.size() != expected) {
    fail("gguf writer: tensor data has ", bytes.size(), " bytes, shape and type need ", expected,
         " (", name, ")");
  }
  tensors_.push_back(
      {std::move(name), type, std::move(shape), expected, {bytes.begin(), bytes.end()}, {}});
}

void GgufWriter::add_tensor(std::string name, QType type, std::vector<uint64_t> shape,
                            Producer produce) {
  if (!produce) fail("gguf writer: tensor has no producer (", name, ")");
  const uint64_t expected = check_tensor(name, type, shape);
  tensors_.push_back({std::move(name), type, std::move(shape), expected, {}, std::move(produce)});
}

void GgufWriter::write(const std::string& path) const {
  OutputFile out(path);
  out.write(kGgufMagic, sizeof(kGgufMagic));
  put<uint32_t>(out, kGgufVersion);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, metadata_.size());
  for (const auto& [key, value] : metadata_) {
    put_string(out, key);
    put<uint32_t>(out, static_cast<uint32_t>(value.type()));
    put_value(out, value);
  }
  uint64_t data_offset = 0;  // relative to the data section
  for (const auto& tensor : tensors_) {
    put_string(out, tensor.name);
    put<uint32_t>(out, static_cast<uint32_t>(tensor.shape.size()));
    for (uint64_t dim : tensor.shape) put<uint64_t>(out, dim);
    put<uint32_t>(out, static_cast<uint32_t>(tensor.type));
    put<uint64_t>(out, data_offset);
    data_offset += tensor.n_bytes + padding_to(tensor.n_bytes, alignment_);
  }
  out.write_zeros(padding_to(out.position(), alignment_));
  for (const auto& tensor : tensors_) {
    if (tensor.produce) {
      // Checked per piece, so a producer that runs long fails before the file grows past it.
      uint64_t produced = 0;
      tensor.produce([&](std::span<const uint8_t> piece) {
        produced += piece.size();
        if (produced > tensor.n_bytes) {
          fail("gguf writer: producer gave more than the ", tensor.n_bytes, " bytes of ",
               tensor.name);
        }
        out.write(piece);
      });
      if (produced != tensor.n_bytes) {
        fail("gguf writer: producer gave ", produced, " bytes, shape and type need ",
             tensor.n_bytes, " (", tensor.name, ")");
      }
    } else {
      out.write(tensor.bytes);
    }
    out.write_zeros(padding_to(tensor.n_bytes, alignment_));
  }
  out.commit();
}

}  // namespace sluice
