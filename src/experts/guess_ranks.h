// GuessRanks: which places of a next-layer guess are worth copying to the device ahead of need.
// A guess lists the experts the next layer's router prefers, most likely first. Copying one
// that turns out right takes its copy off the critical path; copying one that turns out wrong
// spends as much bus time for nothing, and the bus is what an out-of-memory decode waits on. So
// each place in the list (rank) keeps its recent record — guesses copied, guesses the next
// acquire then used — and a rank is copied while its hit rate stays at or above min_rate. A rank
// below it is still copied once in kSampleEvery calls, so its record keeps up with the routing.
// Knows nothing of slots or layers; the numbers of a forward never depend on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sluice::experts {

class GuessRanks {
 public:
  // Measured on the synthetic Qwen3-30B-A3B through 576 device slots (docs/BENCHMARKS.md, "Out
  // of GPU memory: the guesses"): ranks 1-4 right 80% of the time, 5-8 52%; tg64 copying every
  // guess 57.1 t/s, none 55.2, min_rate 0.55 / 0.65 / 0.75 / 0.85: 59.0 / 62.9 / 62.5 / 61.0.
  static constexpr double kDefaultMinRate = 0.65;
  static constexpr double kWarmUp = 32;   // copies before a rank's record counts
  static constexpr double kMemory = 512;  // records halve past this many copies
  static constexpr uint32_t kSampleEvery = 16;

  explicit GuessRanks(double min_rate = kDefaultMinRate) : min_rate_(min_rate) {}

  // Whether to copy the guess at `rank` now (counts the asking, for the samples).
  bool worth_copying(size_t rank);
  void copied(size_t rank);
  void used(size_t rank);
  // The recent hit rate of `rank` (1 before any copy).
  double hit_rate(size_t rank) const;

 private:
  struct Record {
    double copied = 0, used = 0;
    uint32_t declined = 0;
  };
  Record& at(size_t rank);

  double min_rate_;
  std::vector<Record> ranks_;
};

}  // namespace sluice::experts
