// Shared by the format fuzzers: after a parser accepts an input, walk everything it returned —
// every metadata value and array element, every tensor's fields and bytes — so that a reader
// which accepts a lie (a tensor past the end, a size that does not match its shape) or builds a
// value lazily fails here under ASan/UBSan instead of later in a real run.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "format/model_file.h"
#include "format/text_checks.h"
#include "quant/qtype.h"

namespace sluice::fuzz {

// A broken invariant in an accepted file is a finding: say which and abort.
[[noreturn]] inline void invariant_failed(const char* what, const std::string& name) {
  std::fprintf(stderr, "fuzz invariant broken: %s (%s)\n", what, name.c_str());
  std::abort();
}

// Folds into a value the optimiser cannot drop, so every byte is really read.
inline volatile uint64_t g_sink = 0;

inline void walk_value(const MetaValue& value, int depth) {
  if (depth > 64) invariant_failed("metadata nested deeper than 64 arrays was accepted", "");
  if (!value.is_array()) {
    if (const std::string* text = value.as_string()) g_sink = g_sink + text->size();
    return;
  }
  const uint64_t length = value.array_length();
  switch (value.element_type()) {
    case MetaType::STRING: {
      const auto* strings = value.strings();
      if (!strings || strings->size() != length) invariant_failed("string array length", "");
      for (const auto& text : *strings) g_sink = g_sink + text.size();
      break;
    }
    case MetaType::ARRAY: {
      const auto* arrays = value.arrays();
      if (!arrays || arrays->size() != length) invariant_failed("array-of-arrays length", "");
      for (const auto& inner : *arrays) walk_value(inner, depth + 1);
      break;
    }
    default:
      if (value.element_bytes().size() != length * meta_type_size(value.element_type()))
        invariant_failed("array byte size", "");
      for (uint64_t i = 0; i < length; ++i) {
        const double widened = value.element_as_double(i);  // may be NaN or negative: keep bits
        uint64_t bits = 0;
        std::memcpy(&bits, &widened, sizeof(bits));
        g_sink = g_sink + bits + value.element_as_u64(i);
      }
  }
}

// `input` is what the parser was given; every tensor of an in-memory parse lies inside it.
inline void walk_model(const ModelFile& model, std::span<const uint8_t> input) {
  for (const MetaEntry& entry : model.metadata()) {
    if (model.find(entry.key) != &entry.value) invariant_failed("metadata index", entry.key);
    if (!is_valid_utf8(entry.key)) invariant_failed("key is not UTF-8", entry.key);
    walk_value(entry.value, 0);
  }
  std::vector<std::pair<uint64_t, uint64_t>> extents;  // [n_tensors] {offset, end}
  for (const TensorInfo& tensor : model.tensors()) {
    if (model.find_tensor(tensor.name) != &tensor) invariant_failed("tensor index", tensor.name);
    if (tensor.n_dims > kMaxDims) invariant_failed("n_dims > 4", tensor.name);
    if (!is_valid_utf8(tensor.name)) invariant_failed("tensor name is not UTF-8", tensor.name);
    const auto traits = qtype_traits(static_cast<uint32_t>(tensor.type));
    if (!traits) invariant_failed("unknown type", tensor.name);
    uint64_t elements = 1;
    for (uint64_t dim : tensor.ne) {
      if (__builtin_mul_overflow(elements, dim, &elements))
        invariant_failed("element count overflows", tensor.name);
    }
    if (elements != tensor.n_elements) invariant_failed("n_elements != product(ne)", tensor.name);
    const auto row = row_bytes(tensor.type, tensor.ne[0]);
    if (!row) invariant_failed("ne[0] not a multiple of the block size", tensor.name);
    const uint64_t rows = tensor.ne[0] == 0 ? 0 : tensor.n_elements / tensor.ne[0];
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(*row, rows, &bytes) || bytes != tensor.n_bytes)
      invariant_failed("n_bytes != row bytes * rows", tensor.name);
    if (tensor.file_index != 0)
      invariant_failed("in-memory parse names a second file", tensor.name);
    uint64_t end = 0;
    if (__builtin_add_overflow(tensor.offset, tensor.n_bytes, &end) || end > input.size())
      invariant_failed("tensor bytes past the end of the input", tensor.name);
    if (tensor.offset < model.data_offset) invariant_failed("tensor before the data", tensor.name);
    if (tensor.n_bytes != 0) extents.emplace_back(tensor.offset, end);
    if (tensor.offset % model.alignment != 0) invariant_failed("misaligned tensor", tensor.name);
    uint64_t sum = 0;
    for (uint64_t i = tensor.offset; i < end; ++i) sum += input[i];
    g_sink = g_sink + sum;
  }
  std::sort(extents.begin(), extents.end());
  for (size_t i = 1; i < extents.size(); ++i) {
    if (extents[i].first < extents[i - 1].second) invariant_failed("tensors overlap", "");
  }
}

}  // namespace sluice::fuzz
