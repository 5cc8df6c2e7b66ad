// GuessRanks: a rank of the next-layer guess is copied while it has been right often enough
// lately; below the rate it is only sampled, and it comes back once it is right again.
#include "experts/guess_ranks.h"

#include <gtest/gtest.h>

namespace sluice::experts {
namespace {

// `n` guesses at `rank`, each copied when worth it, `right` of every 10 copies then used.
int copy_guesses(GuessRanks& ranks, size_t rank, int n, int right) {
  int copies = 0;
  for (int i = 0; i < n; ++i) {
    if (!ranks.worth_copying(rank)) continue;
    ranks.copied(rank);
    if (copies++ % 10 < right) ranks.used(rank);
  }
  return copies;
}

TEST(GuessRanks, EveryRankIsCopiedUntilItsRecordCounts) {
  GuessRanks ranks(0.65);
  EXPECT_DOUBLE_EQ(ranks.hit_rate(7), 1.0);
  EXPECT_EQ(copy_guesses(ranks, 7, 32, 0), 32);  // always wrong, yet the warm-up copies them all
  EXPECT_FALSE(ranks.worth_copying(7));
  EXPECT_DOUBLE_EQ(ranks.hit_rate(7), 0.0);
}

TEST(GuessRanks, ARankRightAtTheRateKeepsBeingCopied) {
  GuessRanks ranks(0.65);
  EXPECT_EQ(copy_guesses(ranks, 0, 1000, 7), 1000);  // 70% right
  EXPECT_NEAR(ranks.hit_rate(0), 0.7, 0.01);
}

TEST(GuessRanks, ARankBelowTheRateIsOnlySampledAndComesBack) {
  GuessRanks ranks(0.65);
  const int copied = copy_guesses(ranks, 3, 1600, 5);  // 50% right: past the warm-up, sampled
  EXPECT_LT(copied, 32 + 1600 / int(GuessRanks::kSampleEvery) + 1);
  EXPECT_GT(copied, 32);
  // Right every time from now on: the samples lift its record back over the rate.
  int copies = 0;
  for (int i = 0; i < 4000; ++i) {
    if (!ranks.worth_copying(3)) continue;
    ranks.copied(3);
    ranks.used(3);
    ++copies;
  }
  EXPECT_TRUE(ranks.worth_copying(3));
  EXPECT_GE(ranks.hit_rate(3), 0.65);
  EXPECT_GT(copies, 4000 / 2);
}

TEST(GuessRanks, RanksKeepTheirOwnRecords) {
  GuessRanks ranks(0.65);
  copy_guesses(ranks, 0, 100, 10);
  copy_guesses(ranks, 1, 100, 0);
  EXPECT_TRUE(ranks.worth_copying(0));
  EXPECT_FALSE(ranks.worth_copying(1));
  EXPECT_TRUE(ranks.worth_copying(2));  // never asked: warming up
}

}  // namespace
}  // namespace sluice::experts
