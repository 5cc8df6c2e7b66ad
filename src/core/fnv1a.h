// FNV-1a, 64 bits: a small, fast, stable hash of bytes, for identities and seeds that must be
// the same on every machine and in every release (never for security).
#pragma once

#include <cstdint>
#include <span>

namespace sluice {

inline uint64_t fnv1a64(std::span<const uint8_t> bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const uint8_t byte : bytes) hash = (hash ^ byte) * 0x100000001b3ull;
  return hash;
}

}  // namespace sluice
