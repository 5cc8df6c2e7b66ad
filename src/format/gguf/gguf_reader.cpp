// GGUF reader: a bounds-checked cursor over the header, the metadata values (nested arrays
// included), the tensor infos, then the checks that need all tensors (ranges, overlaps).
// Every error reads `gguf: <path>: <what> (<field or tensor>: <value>)`.
#include "format/gguf/gguf_reader.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <sstream>
#include <unordered_set>

#include "core/checked_math.h"
#include "core/error.h"
#include "format/gguf/gguf_constants.h"
#include "format/text_checks.h"

namespace sluice {
namespace {

// Smallest encodings, used to bound counts by the bytes that remain: a tensor info is at least
// a name length, n_dims, one dim, a type and an offset; a key-value pair a key length, a type
// and a one-byte value.
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;

class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, const std::string& name) : bytes_(bytes), name_(name) {}

  uint64_t position() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }
  const std::string& name() const { return name_; }

  template <class... Parts>
  [[noreturn]] void error(std::string_view what, const Parts&... field_and_value) const {
    std::ostringstream detail;
    (detail << ... << field_and_value);
    fail("gguf: ", name_, ": ", what, " (", detail.str(), ")");
  }

  template <class T>
  T read(std::string_view what) {
    if (remaining() < sizeof(T)) error("file ends inside the header", what, ": offset ", pos_);
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  std::span<const uint8_t> take(uint64_t n, std::string_view what) {
    if (remaining() < n) error("file ends inside the header", what, ": offset ", pos_);
    auto out = bytes_.subspan(pos_, n);
    pos_ += n;
    return out;
  }

  // A length-prefixed string whose length must fit in what remains of the file.
  std::string read_string(std::string_view what) {
    const uint64_t length = read<uint64_t>(what);
    if (length > remaining()) error("string length exceeds the remaining file", what, ": ", length);
    auto chars = take(length, what);
    return {reinterpret_cast<const char*>(chars.data()), chars.size()};
  }

 private:
  std::span<const uint8_t> bytes_;
  const std::string& name_;
  uint64_t pos_ = 0;
};

std::string magic_text(std::span<const uint8_t> bytes) {
  return printable(
      {reinterpret_cast<const char*>(bytes.data()), std::min<size_t>(4, bytes.size())});
}

uint32_t read_version(Cursor& cursor, std::span<const uint8_t> bytes) {
  if (bytes.size() < 4 || std::memcmp(bytes.data(), kGgufMagic, 4) != 0) {
    cursor.error("not a GGUF file, bad magic", "magic: ", magic_text(bytes));
  }
  cursor.take(4, "magic");
  const auto version = cursor.read<uint32_t>("version");
  // A big-endian v2/v3 file reads here as 0x02000000 / 0x03000000: low half zero.
  if (version != 0 && (version & 0xFFFF) == 0) {
    char hex[16];
    std::snprintf(hex, sizeof(hex), "0x%08X", version);
    cursor.error("big-endian GGUF files are not supported", "version: ", hex);
  }
  if (version == 1) cursor.error("GGUF v1 is not supported, re-convert the model", "version: 1");
  if (version == 0 || version > kGgufVersion) {
    cursor.error("unsupported GGUF version", "version: ", version);
  }
  return version;
}

MetaValue read_value(Cursor& cursor, MetaType type, uint32_t depth, const std::string& key);

MetaType read_meta_type(Cursor& cursor, const std::string& key) {
  const auto id = cursor.read<uint32_t>(key);
  const auto type = meta_type_from_id(id);
  if (!type) cursor.error("unknown metadata value type", printable(key), ": ", id);
  return *type;
}

MetaValue read_array(Cursor& cursor, uint32_t depth, const std::string& key) {
  if (depth >= kGgufMaxArrayDepth)
    cursor.error("arrays nested too deep", printable(key), ": ", depth + 1);
  const MetaType element = read_meta_type(cursor, key);
  const auto length = cursor.read<uint64_t>(key);
  const uint64_t min_element_bytes = element == MetaType::STRING  ? 8
                                     : element == MetaType::ARRAY ? 12
                                                                  : meta_type_size(element);
  if (length > cursor.remaining() / min_element_bytes) {
    cursor.error("array length exceeds the remaining file", printable(key), ": ", length);
  }
  if (element == MetaType::STRING) {
    std::vector<std::string> strings(length);
    for (auto& string : strings) string = cursor.read_string(key);
    return MetaValue::string_array(std::move(strings));
  }
  if (element == MetaType::ARRAY) {
    std::vector<MetaValue> arrays;
    arrays.reserve(length);
    for (uint64_t i = 0; i < length; ++i) arrays.push_back(read_array(cursor, depth + 1, key));
    return MetaValue::array_of_arrays(std::move(arrays));
  }
  auto raw = cursor.take(length * min_element_bytes, key);
  return MetaValue::raw_array(element, {raw.begin(), raw.end()}, length);
}

template <class T>
MetaValue read_scalar(Cursor& cursor, const std::string& key) {
  return MetaValue::scalar(cursor.read<T>(key));
}

MetaValue read_value(Cursor& cursor, MetaType type, uint32_t depth, const std::string& key) {
  switch (type) {
    case MetaType::U8:
      return read_scalar<uint8_t>(cursor, key);
    case MetaType::I8:
      return read_scalar<int8_t>(cursor, key);
    case MetaType::U16:
      return read_scalar<uint16_t>(cursor, key);
    case MetaType::I16:
      return read_scalar<int16_t>(cursor, key);
    case MetaType::U32:
      return read_scalar<uint32_t>(cursor, key);
    case MetaType::I32:
      return read_scalar<int32_t>(cursor, key);
    case MetaType::U64:
      return read_scalar<uint64_t>(cursor, key);
    case MetaType::I64:
      return read_scalar<int64_t>(cursor, key);
    case MetaType::F32:
      return read_scalar<float>(cursor, key);
    case MetaType::F64:
      return read_scalar<double>(cursor, key);
    case MetaType::BOOL:
      return MetaValue::scalar(cursor.read<uint8_t>(key) != 0);
    case MetaType::STRING:
      return MetaValue::string(cursor.read_string(key));
    case MetaType::ARRAY:
      return read_array(cursor, depth, key);
  }
  cursor.error("unknown metadata value type", printable(key), ": ", static_cast<uint32_t>(type));
}

std::string read_name(Cursor& cursor, std::string_view what, uint64_t index) {
  std::string name = cursor.read_string(what);
  if (name.empty()) cursor.error(std::string(what) + " is empty", "index: ", index);
  if (!is_valid_utf8(name)) {
    cursor.error(std::string(what) + " is not valid UTF-8", "index ", index, ": ", printable(name));
  }
  return name;
}

void read_metadata(Cursor& cursor, uint64_t n_kv, ModelFile& model) {
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = read_name(cursor, "metadata key", i);
    if (model.contains(key)) cursor.error("duplicate metadata key", "key: ", key);
    const MetaType type = read_meta_type(cursor, key);
    MetaValue value = read_value(cursor, type, 0, key);
    model.add_metadata(std::move(key), std::move(value));
  }
}

uint64_t read_alignment(const Cursor& cursor, const ModelFile& model) {
  const MetaValue* value = model.find(kGgufAlignmentKey);
  if (value == nullptr) return kGgufDefaultAlignment;
  if (value->type() != MetaType::U32) {
    cursor.error("alignment must be a u32", kGgufAlignmentKey, ": ", meta_type_name(value->type()));
  }
  const uint32_t alignment = *value->as<uint32_t>();
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    cursor.error("alignment is not a nonzero power of two", kGgufAlignmentKey, ": ", alignment);
  }
  return alignment;
}

std::string shape_text(const TensorInfo& tensor) {
  std::string text = "[";
  for (uint32_t i = 0; i < tensor.n_dims; ++i) {
    text += (i ? ", " : "") + std::to_string(tensor.ne[i]);
  }
  return text + "]";
}

void read_shape(Cursor& cursor, TensorInfo& tensor) {
  const std::string name = printable(tensor.name);
  tensor.n_dims = cursor.read<uint32_t>(tensor.name);
  if (tensor.n_dims < 1 || tensor.n_dims > kMaxDims) {
    cursor.error("tensor has an invalid number of dimensions", name, ": ", tensor.n_dims);
  }
  // ggml indexes with int64_t, so every count must stay below INT64_MAX. Zero-sized
  // dimensions are legal (llama.cpp accepts them).
  uint64_t n_elements = 1;
  for (uint32_t d = 0; d < tensor.n_dims; ++d) {
    tensor.ne[d] = cursor.read<uint64_t>(tensor.name);
    if (tensor.ne[d] > static_cast<uint64_t>(INT64_MAX)) {
      cursor.error("tensor dimension out of range", name, ": ne[", d, "] = ", tensor.ne[d]);
    }
    auto product = checked_mul(n_elements, tensor.ne[d]);
    if (!product || *product > static_cast<uint64_t>(INT64_MAX)) {
      cursor.error("tensor element count overflows", name, ": ", shape_text(tensor));
    }
    n_elements = *product;
  }
  tensor.n_elements = n_elements;
}

void read_type_and_size(Cursor& cursor, TensorInfo& tensor) {
  const std::string name = printable(tensor.name);
  const auto type_id = cursor.read<uint32_t>(tensor.name);
  const auto traits = qtype_traits(type_id);
  if (!traits || !traits->in_gguf) cursor.error("unknown tensor type", name, ": ", type_id);
  tensor.type = traits->type;
  if (tensor.ne[0] % traits->block_size != 0) {
    cursor.error(std::string("tensor row length is not a multiple of the ") +
                     std::string(traits->name) + " block size " +
                     std::to_string(traits->block_size),
                 name, ": ne[0] = ", tensor.ne[0]);
  }
  auto bytes = checked_mul(tensor.n_elements / traits->block_size, traits->block_bytes);
  if (!bytes) cursor.error("tensor byte size overflows", name, ": ", shape_text(tensor));
  tensor.n_bytes = *bytes;
}

std::vector<TensorInfo> read_tensor_infos(Cursor& cursor, uint64_t n_tensors, uint64_t alignment) {
  std::vector<TensorInfo> tensors;
  tensors.reserve(n_tensors);
  std::unordered_set<std::string> names;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo tensor;
    tensor.name = read_name(cursor, "tensor name", i);
    if (!names.insert(tensor.name).second) {
      cursor.error("duplicate tensor name", "tensor: ", printable(tensor.name));
    }
    read_shape(cursor, tensor);
    read_type_and_size(cursor, tensor);
    tensor.offset = cursor.read<uint64_t>(tensor.name);  // relative until placed
    if (tensor.offset % alignment != 0) {
      cursor.error("tensor offset is not a multiple of the alignment " + std::to_string(alignment),
                   printable(tensor.name), ": ", tensor.offset);
    }
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

// Turns data-relative offsets into absolute ones and checks every range lies in the file and
// no two tensors share a byte.
void place_tensors(const Cursor& cursor, std::vector<TensorInfo>& tensors, uint64_t data_offset,
                   uint64_t file_size) {
  for (auto& tensor : tensors) {
    auto start = checked_add(data_offset, tensor.offset);
    auto end = start ? checked_add(*start, tensor.n_bytes) : std::nullopt;
    if (!end || *end > file_size) {
      cursor.error("tensor data extends past the end of the file", printable(tensor.name),
                   ": offset ", tensor.offset, " + ", tensor.n_bytes, " bytes > data section of ",
                   file_size - std::min(file_size, data_offset));
    }
    tensor.offset = *start;
  }
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors[a].offset < tensors[b].offset; });
  const TensorInfo* previous = nullptr;
  for (size_t index : order) {
    const TensorInfo& tensor = tensors[index];
    if (tensor.n_bytes == 0) continue;
    if (previous != nullptr && previous->offset + previous->n_bytes > tensor.offset) {
      cursor.error("tensor data overlaps another tensor", printable(tensor.name), ": overlaps ",
                   printable(previous->name));
    }
    previous = &tensor;
  }
}

}  // namespace

ModelFile parse_gguf(std::span<const uint8_t> bytes, const std::string& display_name) {
  Cursor cursor(bytes, display_name);
  ModelFile model(FileFormat::gguf, display_name);
  model.version = read_version(cursor, bytes);
  const auto n_tensors = cursor.read<uint64_t>("tensor count");
  const auto n_kv = cursor.read<uint64_t>("metadata count");
  if (n_tensors > cursor.remaining() / kMinTensorInfoBytes) {
    cursor.error("tensor count exceeds what the file can hold", "tensor_count: ", n_tensors);
  }
  if (n_kv > cursor.remaining() / kMinKvBytes) {
    cursor.error("metadata count exceeds what the file can hold", "kv_count: ", n_kv);
  }
  read_metadata(cursor, n_kv, model);
  model.alignment = read_alignment(cursor, model);
  auto tensors = read_tensor_infos(cursor, n_tensors, model.alignment);
  // The data section starts at the next multiple of the alignment after the tensor infos.
  model.data_offset = *checked_align_up(cursor.position(), model.alignment);
  place_tensors(cursor, tensors, model.data_offset, bytes.size());
  for (auto& tensor : tensors) model.add_tensor(std::move(tensor));
  model.add_source({display_name, bytes.size(), nullptr});
  return model;
}

ModelFile read_gguf(const std::string& path) {
  auto file = std::make_shared<File>(File::open(path));
  // Header parsing touches only the first pages; tensor pages load when first viewed.
  file->map(AccessHint::normal);
  ModelFile model = parse_gguf(file->bytes(), path);
  // parse_gguf registered a source without a File; attaching it keeps the mapping alive.
  model.attach_file(0, std::move(file));
  return model;
}

}  // namespace sluice
