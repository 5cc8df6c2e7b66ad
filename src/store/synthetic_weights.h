// Random tensor contents for synthetic models, written straight into the block layouts: random
// quants with finite f16 (or E8M0) scales sized so the values have a chosen spread. No float
// quantizer runs, so filling keeps up with the disk. Deterministic: the same seed gives the same
// bytes. Knows block layouts, not tensor names or architectures.
#pragma once

#include <cstdint>
#include <string>

#include "quant/qtype.h"

namespace sluice {

// What the values of one tensor look like.
struct WeightSpread {
  enum class Kind {
    matrix,      // zero mean, root-mean-square `scale`
    norm,        // 1 plus noise uniform in [-scale, scale] (F32 only)
    negative,    // uniform in [-high, -scale] (F32 only): decays that must stay negative
    expert_ids,  // I32 rows of `row` distinct ids below `n_expert` (see fill_expert_ids)
  };
  Kind kind = Kind::matrix;
  float scale = 0;
  float high = 0;
  uint32_t n_expert = 0;
  uint32_t row = 0;
};

// Types fill_random_weights can write, for messages: "F32, F16, …".
std::string synthetic_type_names();
bool synthetic_type_supported(QType type);

// Fills `n_elements` values (a whole number of blocks of `type`) at `dst` from the generator
// seeded with `seed`. A norm spread is refused for anything but F32.
void fill_random_weights(QType type, const WeightSpread& spread, uint64_t seed, void* dst,
                         uint64_t n_elements);

// Elements [first, first + count) of an I32 table of rows of `row` distinct expert ids below
// `n_expert`. Each row depends only on `seed` and its index, so pieces may split rows.
void fill_expert_ids(uint64_t seed, uint32_t n_expert, uint32_t row, uint64_t first, int32_t* dst,
                     uint64_t count);

// A seed for one piece of one tensor, mixed from the file's seed, the tensor's name and the
// piece's index, so each piece can be made on its own, in any order, on any thread.
uint64_t piece_seed(uint64_t seed, const std::string& tensor_name, uint64_t piece);

}  // namespace sluice
