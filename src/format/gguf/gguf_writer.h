// GgufWriter: collects metadata (every GGUF value type, arrays included) and tensors, then
// writes a GGUF v3 file atomically (temporary name, rename) that llama.cpp and gguf-py read:
// tensor offsets relative to the data section, each tensor padded to the alignment. A tensor's
// bytes are either copied in up front or produced in pieces while the file is written (for
// files larger than memory).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "format/meta_value.h"
#include "quant/qtype.h"

namespace sluice {

class GgufWriter {
 public:
  GgufWriter() = default;

  // Sets the data alignment (a nonzero power of two) and records it as general.alignment.
  void set_alignment(uint32_t alignment);
  uint32_t alignment() const { return alignment_; }

  // Appends a key; duplicates are refused. general.alignment must be a u32 power of two.
  // Arrays of arrays are valid GGUF but llama.cpp refuses them: model files must not use them.
  void add_metadata(std::string key, MetaValue value);

  // `shape` is first dimension fastest (ne[0] first), 1 to 4 dims. The writer copies `bytes`,
  // whose length must equal what type and shape imply.
  void add_tensor(std::string name, QType type, std::vector<uint64_t> shape,
                  std::span<const uint8_t> bytes);

  // A tensor whose bytes are made during write(): `produce` is called once, in file order, and
  // hands its bytes to `emit` in pieces of any size; together they must be exactly what type and
  // shape imply, or write() fails (leaving no file). Lets a caller write more than fits in RAM.
  using Emit = std::function<void(std::span<const uint8_t>)>;
  using Producer = std::function<void(const Emit& emit)>;
  void add_tensor(std::string name, QType type, std::vector<uint64_t> shape, Producer produce);

  // Writes everything to `path` (a temporary file renamed into place at the end).
  void write(const std::string& path) const;

 private:
  struct PendingTensor {
    std::string name;
    QType type;
    std::vector<uint64_t> shape;
    uint64_t n_bytes = 0;
    std::vector<uint8_t> bytes;  // when produce is empty
    Producer produce;
  };

  // Validates name, type and shape; returns the byte size they imply.
  uint64_t check_tensor(const std::string& name, QType type,
                        const std::vector<uint64_t>& shape) const;

  uint32_t alignment_ = 32;
  std::vector<std::pair<std::string, MetaValue>> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace sluice
