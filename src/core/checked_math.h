// Overflow-checked size arithmetic for values that come from files and requests: a header
// that claims 2^63 elements must produce an error, never a wrapped size.
#pragma once

#include <cstdint>
#include <optional>

namespace sluice {

inline std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  uint64_t result = 0;
  if (__builtin_mul_overflow(a, b, &result)) return std::nullopt;
  return result;
}

inline std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) {
  uint64_t result = 0;
  if (__builtin_add_overflow(a, b, &result)) return std::nullopt;
  return result;
}

// Rounds up to a multiple of `alignment` (a power of two or any positive value).
inline std::optional<uint64_t> checked_align_up(uint64_t value, uint64_t alignment) {
  auto bumped = checked_add(value, alignment - 1);
  if (!bumped) return std::nullopt;
  return *bumped / alignment * alignment;
}

}  // namespace sluice
