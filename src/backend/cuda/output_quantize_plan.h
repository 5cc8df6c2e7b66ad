// OutputQuantizePlan: which of a decode step's ops also quantize their output for the product
// that reads it next. A decode step's products (q/k/v, gate/up, the output head, the routed
// experts' down) read their input as int8 activations (quant_matmul.h: quantize_activations), a
// kernel launch of its own that costs about what the op that wrote the input does. That op — an
// RMS norm, a GLU — has its rows at hand and can write both. It cannot know which format (Q8_K,
// Q8_0, Q8_1) its reader wants, so that is learned: the first step runs the plain op and the
// product tells the plan what it needed from it; on later steps the producer writes that format
// too, and the product — the very next op, reading the same rows — takes those instead of
// quantizing. Adjacency in the stream's op sequence is what makes it safe: nothing can have
// written the rows in between. A producer whose readers wanted different formats over time is
// never fused again (no recorded step re-captured every other token).
// Plain C++: the backend keeps one per stream, the tests drive it without a device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <tuple>

#include "quant/qtype.h"

namespace sluice::cuda {

class OutputQuantizePlan {
 public:
  // Producers remembered at most; past that the plan forgets them all and learns anew (a server
  // that makes session after session makes new output rows each time: the map must not grow
  // without end). A model's decode step has a few per layer.
  static constexpr size_t kMaxProducers = 1 << 14;

  // A producer's identity from one step to the next: an input of its own (a norm's weight, each
  // layer's own; a GLU's up rows) and its output rows.
  struct Producer {
    const void* input;
    const float* y;
    int64_t n_rows, n;
  };

  // The activation format (Q8_K, Q8_0 or Q8_1) the producer should also write, when learned.
  std::optional<QType> format_for(const Producer& producer) const;
  // The producer ran as the stream's op number `op`, writing `format`'s activations (nullopt:
  // none) into `quantized`.
  void produced(const Producer& producer, std::optional<QType> format, const void* quantized,
                uint64_t op);
  // A product, the stream's op number `op`, reads x (n_tokens rows of n_cols) as activations of
  // `format`: the device buffer holding them when op - 1 was the producer that wrote x in that
  // format; otherwise nullptr (the product quantizes x itself), and a producer that wrote x as
  // op - 1 learns the format.
  const void* quantized_input(const float* x, int64_t n_tokens, int64_t n_cols, QType format,
                              uint64_t op);

 private:
  using Key = std::tuple<const void*, const float*, int64_t, int64_t>;
  static Key key(const Producer& p) { return {p.input, p.y, p.n_rows, p.n}; }

  // Per producer: the format its reader wants, or nullopt once readers disagreed.
  std::map<Key, std::optional<QType>> learned_;
  struct Last {
    Producer producer{};
    std::optional<QType> format;
    const void* quantized = nullptr;
    uint64_t op = 0;
    bool ran = false;
  } last_;
};

}  // namespace sluice::cuda
