// GuessRanks: per-rank records of next-layer guesses and whether copying a rank pays.
#include "experts/guess_ranks.h"

namespace sluice::experts {

GuessRanks::Record& GuessRanks::at(size_t rank) {
  if (rank >= ranks_.size()) ranks_.resize(rank + 1);
  return ranks_[rank];
}

double GuessRanks::hit_rate(size_t rank) const {
  if (rank >= ranks_.size() || ranks_[rank].copied == 0) return 1.0;
  return ranks_[rank].used / ranks_[rank].copied;
}

bool GuessRanks::worth_copying(size_t rank) {
  Record& r = at(rank);
  if (r.copied < kWarmUp || r.used >= min_rate_ * r.copied) return true;
  return ++r.declined % kSampleEvery == 0;
}

void GuessRanks::copied(size_t rank) {
  Record& r = at(rank);
  r.copied += 1;
  if (r.copied > kMemory) r.copied /= 2, r.used /= 2;
}

void GuessRanks::used(size_t rank) {
  at(rank).used += 1;
}

}  // namespace sluice::experts
