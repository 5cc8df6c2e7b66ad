// ByteBuilder: appends little-endian primitives and GGUF strings to a byte vector, so tests can
// hand-build valid and malformed GGUF and safetensors files without the writer under test.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::test {

class ByteBuilder {
 public:
  template <class T>
  ByteBuilder& put(T value) {
    const size_t at = bytes.size();
    bytes.resize(at + sizeof(T));
    std::memcpy(bytes.data() + at, &value, sizeof(T));
    return *this;
  }
  ByteBuilder& raw(std::string_view text) {
    bytes.insert(bytes.end(), text.begin(), text.end());
    return *this;
  }
  // GGUF string: u64 length, then the bytes.
  ByteBuilder& str(std::string_view text) {
    put<uint64_t>(text.size());
    return raw(text);
  }
  ByteBuilder& zeros(size_t count) {
    bytes.resize(bytes.size() + count, 0);
    return *this;
  }
  ByteBuilder& pad_to(size_t alignment) {
    while (bytes.size() % alignment != 0) bytes.push_back(0);
    return *this;
  }
  // GGUF header: magic, version, tensor count, kv count.
  ByteBuilder& gguf_header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    raw("GGUF");
    put<uint32_t>(version);
    put<uint64_t>(n_tensors);
    return put<uint64_t>(n_kv);
  }
  ByteBuilder& tensor_info(std::string_view name, std::vector<uint64_t> ne, uint32_t type,
                           uint64_t offset) {
    str(name);
    put<uint32_t>(static_cast<uint32_t>(ne.size()));
    for (uint64_t dim : ne) put<uint64_t>(dim);
    put<uint32_t>(type);
    return put<uint64_t>(offset);
  }

  std::vector<uint8_t> bytes;
};

}  // namespace sluice::test
