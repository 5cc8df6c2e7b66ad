// A test base with fresh random data each run: the generator is seeded from the clock and the
// seed goes into every failure message through where(); uniform() never draws a zero (a zero
// would hide a missed scale or a sign). Shared by the CPU op tests and the CUDA device fixture.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace sluice::test {

inline uint32_t clock_seed() {
  return uint32_t(std::chrono::steady_clock::now().time_since_epoch().count());
}

class SeededTest : public ::testing::Test {
 protected:
  SeededTest() : seed_(clock_seed()) { rng_.seed(seed_); }

  std::string where() const { return "seed " + std::to_string(seed_); }

  std::vector<float> uniform(size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) {
      do x = dist(rng_);
      while (x == 0.0f);  // never zeros
    }
    return v;
  }

  uint32_t seed_ = 0;
  std::mt19937 rng_;
};

}  // namespace sluice::test
