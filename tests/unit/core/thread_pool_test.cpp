// ThreadPool: every index visited exactly once, chunks respected, the pool reusable across
// many loops (the start/finish handshake), and small pools running inline.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace sluice {
namespace {

TEST(ThreadPool, VisitsEveryIndexOnce) {
  for (const int n_threads : {1, 2, 5}) {
    ThreadPool pool(n_threads);
    EXPECT_EQ(pool.size(), n_threads);
    for (const int64_t chunk : {1, 3, 64}) {
      std::vector<std::atomic<int>> hits(1001);
      pool.parallel_for(0, 1001, chunk, [&](int64_t lo, int64_t hi) {
        EXPECT_LE(hi - lo, chunk);
        for (int64_t i = lo; i < hi; ++i) hits[size_t(i)].fetch_add(1);
      });
      for (const auto& hit : hits) EXPECT_EQ(hit.load(), 1);
    }
  }
}

TEST(ThreadPool, ManyShortLoopsFinishInOrder) {
  ThreadPool pool(4);
  int64_t total = 0;
  for (int loop = 0; loop < 2000; ++loop) {
    std::atomic<int64_t> sum{0};
    pool.parallel_for(0, 17, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) sum.fetch_add(i);
    });
    total += sum.load();
  }
  EXPECT_EQ(total, 2000 * (16 * 17 / 2));
}

TEST(ThreadPool, EmptyAndOffsetRanges) {
  ThreadPool pool(3);
  int calls = 0;
  pool.parallel_for(5, 5, 1, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
  std::atomic<int64_t> sum{0};
  pool.parallel_for(10, 20, 2, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) sum.fetch_add(i);
  });
  EXPECT_EQ(sum.load(), 145);
}

}  // namespace
}  // namespace sluice
