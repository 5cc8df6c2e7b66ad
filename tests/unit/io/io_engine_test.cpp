// IoEngine, both kinds: bytes land where they belong at every queue depth, through buffered and
// O_DIRECT fds; errors come back as errnos; queued reads start demand-first, can be cancelled and
// promoted; destruction with reads in flight is safe. Ordering is checked at queue depth 1, where
// a read starts only when reap() collects the previous one, so nothing depends on timing.
#include "io/io_engine.h"

#include <gtest/gtest.h>
#include <liburing.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "io/file.h"
#include "sluice/error.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kPage = 4096;
constexpr uint64_t kFileSize = 4 * 1024 * 1024 + 123;  // not a whole page: EOF mid-page

// A hash of the position, so a read from the wrong offset cannot match by accident.
uint8_t pattern_byte(uint64_t position) {
  return static_cast<uint8_t>((position * 0x9E3779B97F4A7C15ull) >> 56);
}

bool kernel_allows_io_uring() {
  io_uring ring{};
  if (io_uring_queue_init(1, &ring, 0) != 0) return false;
  io_uring_queue_exit(&ring);
  return true;
}

// 4 KiB-aligned memory, as O_DIRECT wants it.
struct AlignedBuffer {
  explicit AlignedBuffer(uint64_t size)
      : bytes(static_cast<uint8_t*>(std::aligned_alloc(kPage, (size + kPage - 1) / kPage * kPage))),
        size(size) {}
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> bytes;
  uint64_t size;
  uint8_t* data() const { return bytes.get(); }
};

std::vector<ReadCompletion> reap_all(IoEngine& engine) {
  std::vector<ReadCompletion> all;
  ReadCompletion batch[16];
  while (engine.pending() > 0) {
    size_t n = engine.reap(batch, 1);
    all.insert(all.end(), batch, batch + n);
  }
  return all;
}

// Completes one read at a time: at queue depth 1 this is the order in which reads started.
std::vector<uint64_t> reap_order(IoEngine& engine) {
  std::vector<uint64_t> tags;
  ReadCompletion one[1];
  while (engine.pending() > 0) {
    EXPECT_EQ(engine.reap(one, 1), 1u);
    EXPECT_EQ(one[0].error, 0) << "tag " << one[0].tag;
    tags.push_back(one[0].tag);
  }
  return tags;
}

class IoEngineTest : public ::testing::TestWithParam<IoEngineKind> {
 protected:
  void SetUp() override {
    if (GetParam() == IoEngineKind::kUring && !kernel_allows_io_uring()) {
      GTEST_SKIP() << "io_uring is not available here";
    }
    std::string pattern = (fs::temp_directory_path() / "sluice_io_engine_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    path_ = (dir_ / "data.bin").string();
    std::vector<char> contents(kFileSize);
    for (uint64_t i = 0; i < kFileSize; ++i) contents[i] = static_cast<char>(pattern_byte(i));
    std::ofstream(path_, std::ios::binary).write(contents.data(), kFileSize);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  std::unique_ptr<IoEngine> make(int queue_depth) const {
    auto engine = make_io_engine(GetParam(), queue_depth);
    EXPECT_STREQ(engine->name(), GetParam() == IoEngineKind::kUring ? "io_uring" : "pread");
    EXPECT_EQ(engine->queue_depth(), queue_depth);
    return engine;
  }

  // Null when the filesystem refuses O_DIRECT (the caller skips).
  std::unique_ptr<File> open_direct() const {
    try {
      return std::make_unique<File>(File::open(path_, {.direct = true}));
    } catch (const Error&) {
      return nullptr;
    }
  }

  static void expect_pattern(const uint8_t* bytes, uint64_t offset, uint64_t length) {
    for (uint64_t i = 0; i < length; ++i) {
      if (bytes[i] != pattern_byte(offset + i)) {
        ADD_FAILURE() << "byte " << offset + i << " differs";
        return;
      }
    }
  }

  static ReadRequest request(int fd, uint64_t offset, uint64_t length, void* dest, uint64_t tag,
                             IoPriority priority = IoPriority::kDemand) {
    return {fd, offset, length, dest, tag, priority};
  }

  // Random whole-page extents, all submitted before any is reaped, each checked byte by byte.
  void read_random_extents(IoEngine& engine, const File& file, uint32_t seed) {
    constexpr int kReads = 200;
    constexpr uint64_t kMaxPages = 8;
    std::mt19937 rng(seed);
    uint64_t n_pages = kFileSize / kPage;
    AlignedBuffer buffer(kReads * kMaxPages * kPage);    // [kReads][kMaxPages * kPage]
    std::vector<std::pair<uint64_t, uint64_t>> extents;  // [kReads] (offset, length)
    for (int i = 0; i < kReads; ++i) {
      uint64_t pages = 1 + rng() % kMaxPages;
      uint64_t offset = rng() % (n_pages - pages + 1) * kPage;
      extents.emplace_back(offset, pages * kPage);
      uint8_t* dest = buffer.data() + i * kMaxPages * kPage;
      auto priority = i % 3 == 0 ? IoPriority::kSpeculative : IoPriority::kDemand;
      engine.submit(request(file.fd(), offset, pages * kPage, dest, i, priority));
    }
    EXPECT_EQ(engine.pending(), size_t{kReads});
    std::vector<int> seen(kReads, 0);
    for (const ReadCompletion& c : reap_all(engine)) {
      ASSERT_LT(c.tag, uint64_t{kReads});
      EXPECT_EQ(c.error, 0) << std::strerror(c.error);
      ++seen[c.tag];
      expect_pattern(buffer.data() + c.tag * kMaxPages * kPage, extents[c.tag].first,
                     extents[c.tag].second);
    }
    for (int i = 0; i < kReads; ++i) EXPECT_EQ(seen[i], 1) << "tag " << i;
  }

  fs::path dir_;
  std::string path_;
};

TEST_P(IoEngineTest, ReadsRandomAlignedExtentsAtEachQueueDepth) {
  File file = File::open(path_);
  for (int depth : {1, 4, 32}) {
    SCOPED_TRACE("queue depth " + std::to_string(depth));
    auto engine = make(depth);
    read_random_extents(*engine, file, 1000 + depth);
  }
}

TEST_P(IoEngineTest, ReadsThroughODirectFd) {
  auto file = open_direct();
  if (!file) GTEST_SKIP() << "this filesystem refuses O_DIRECT";
  for (int depth : {1, 4, 32}) {
    SCOPED_TRACE("queue depth " + std::to_string(depth));
    auto engine = make(depth);
    read_random_extents(*engine, *file, 2000 + depth);
  }
  // The whole file in 1 MiB pieces: large reads, and the last one ends exactly at EOF's page.
  auto engine = make(4);
  uint64_t whole = kFileSize / kPage * kPage;
  AlignedBuffer buffer(whole);
  constexpr uint64_t kPiece = 1024 * 1024;
  for (uint64_t offset = 0; offset < whole; offset += kPiece) {
    engine->submit(request(file->fd(), offset, std::min(kPiece, whole - offset),
                           buffer.data() + offset, offset));
  }
  for (const ReadCompletion& c : reap_all(*engine)) EXPECT_EQ(c.error, 0) << c.tag;
  expect_pattern(buffer.data(), 0, whole);
}

TEST_P(IoEngineTest, ReadsUnalignedExtentsFromBufferedFd) {
  File file = File::open(path_);
  auto engine = make(4);
  std::mt19937 rng(7);
  constexpr int kReads = 100;
  constexpr uint64_t kMaxLength = 10000;
  std::vector<uint8_t> buffer(kReads * (kMaxLength + 8));  // [kReads][kMaxLength + 8]
  std::vector<std::pair<uint64_t, uint64_t>> extents;      // [kReads] (offset, length)
  for (int i = 0; i < kReads; ++i) {
    uint64_t length = 1 + rng() % kMaxLength;
    uint64_t offset = rng() % (kFileSize - length + 1);
    extents.emplace_back(offset, length);
    uint8_t* dest = buffer.data() + i * (kMaxLength + 8) + 1 + i % 7;  // odd addresses too
    engine->submit(request(file.fd(), offset, length, dest, i));
  }
  for (const ReadCompletion& c : reap_all(*engine)) {
    EXPECT_EQ(c.error, 0) << std::strerror(c.error);
    expect_pattern(buffer.data() + c.tag * (kMaxLength + 8) + 1 + c.tag % 7, extents[c.tag].first,
                   extents[c.tag].second);
  }
}

TEST_P(IoEngineTest, ReadPastEndOfFileGivesEnodata) {
  File file = File::open(path_);
  auto engine = make(2);
  std::vector<uint8_t> buffer(3 * kPage);
  engine->submit(request(file.fd(), kFileSize - 100, kPage, buffer.data(), 1));  // ends past EOF
  engine->submit(request(file.fd(), kFileSize + kPage, kPage, buffer.data() + kPage, 2));
  engine->submit(request(file.fd(), kFileSize - 123, 123, buffer.data() + 2 * kPage, 3));
  std::map<uint64_t, int> errors;
  for (const ReadCompletion& c : reap_all(*engine)) errors[c.tag] = c.error;
  EXPECT_EQ(errors, (std::map<uint64_t, int>{{1, ENODATA}, {2, ENODATA}, {3, 0}}));
  expect_pattern(buffer.data() + 2 * kPage, kFileSize - 123, 123);

  auto direct = open_direct();
  if (!direct) return;
  AlignedBuffer aligned(2 * kPage);
  engine->submit(request(direct->fd(), kFileSize / kPage * kPage, 2 * kPage, aligned.data(), 4));
  auto completions = reap_all(*engine);
  ASSERT_EQ(completions.size(), 1u);
  EXPECT_EQ(completions[0].error, ENODATA);
}

TEST_P(IoEngineTest, BadFdGivesEbadfAndEngineStaysUsable) {
  File file = File::open(path_);
  auto engine = make(2);
  std::vector<uint8_t> buffer(kPage);
  engine->submit(request(-1, 0, kPage, buffer.data(), 1));
  engine->submit(request(1 << 24, 0, kPage, buffer.data(), 2));  // beyond any fd limit
  std::map<uint64_t, int> errors;
  for (const ReadCompletion& c : reap_all(*engine)) errors[c.tag] = c.error;
  EXPECT_EQ(errors, (std::map<uint64_t, int>{{1, EBADF}, {2, EBADF}}));

  engine->submit(request(file.fd(), 5 * kPage, kPage, buffer.data(), 3));
  auto completions = reap_all(*engine);
  ASSERT_EQ(completions.size(), 1u);
  EXPECT_EQ(completions[0].tag, 3u);
  EXPECT_EQ(completions[0].error, 0);
  expect_pattern(buffer.data(), 5 * kPage, kPage);
}

TEST_P(IoEngineTest, CancelRemovesQueuedReadsOnly) {
  File file = File::open(path_);
  auto engine = make(1);
  constexpr int kReads = 12;
  std::vector<uint8_t> buffer(kReads * kPage);
  for (int i = 0; i < kReads; ++i) {
    auto priority = i >= 8 ? IoPriority::kSpeculative : IoPriority::kDemand;
    engine->submit(request(file.fd(), i * kPage, kPage, buffer.data() + i * kPage, i, priority));
  }
  EXPECT_FALSE(engine->cancel(0));  // started at submit: the only slot was free
  EXPECT_TRUE(engine->cancel(4));
  EXPECT_TRUE(engine->cancel(5));
  EXPECT_TRUE(engine->cancel(11));
  EXPECT_FALSE(engine->cancel(4));   // already gone
  EXPECT_FALSE(engine->cancel(77));  // never submitted
  EXPECT_EQ(engine->pending(), size_t{kReads - 3});

  std::vector<uint64_t> tags;
  for (const ReadCompletion& c : reap_all(*engine)) {
    EXPECT_EQ(c.error, 0);
    expect_pattern(buffer.data() + c.tag * kPage, c.tag * kPage, kPage);
    tags.push_back(c.tag);
  }
  std::sort(tags.begin(), tags.end());
  EXPECT_EQ(tags, (std::vector<uint64_t>{0, 1, 2, 3, 6, 7, 8, 9, 10}));
  EXPECT_FALSE(engine->cancel(1));  // completed and reaped
}

TEST_P(IoEngineTest, StartsQueuedDemandBeforeSpeculative) {
  File file = File::open(path_);
  auto engine = make(1);
  std::vector<uint8_t> buffer(9 * kPage);
  auto submit = [&](uint64_t tag, IoPriority priority) {
    engine->submit(
        request(file.fd(), tag * kPage, kPage, buffer.data() + tag * kPage, tag, priority));
  };
  submit(0, IoPriority::kSpeculative);  // takes the free slot at once, whatever its priority
  for (uint64_t tag : {1, 2, 3, 4}) submit(tag, IoPriority::kSpeculative);
  for (uint64_t tag : {5, 6, 7, 8}) submit(tag, IoPriority::kDemand);
  EXPECT_EQ(reap_order(*engine), (std::vector<uint64_t>{0, 5, 6, 7, 8, 1, 2, 3, 4}));
  for (uint64_t tag = 0; tag < 9; ++tag) {
    expect_pattern(buffer.data() + tag * kPage, tag * kPage, kPage);
  }
}

TEST_P(IoEngineTest, PromoteMovesQueuedSpeculativeReadToDemand) {
  File file = File::open(path_);
  auto engine = make(1);
  std::vector<uint8_t> buffer(6 * kPage);
  auto submit = [&](uint64_t tag, IoPriority priority) {
    engine->submit(
        request(file.fd(), tag * kPage, kPage, buffer.data() + tag * kPage, tag, priority));
  };
  submit(0, IoPriority::kSpeculative);
  submit(1, IoPriority::kSpeculative);
  submit(2, IoPriority::kSpeculative);
  submit(3, IoPriority::kSpeculative);
  submit(4, IoPriority::kDemand);
  engine->promote(3);   // joins the demand queue behind 4
  engine->promote(0);   // in flight: no-op
  engine->promote(4);   // already demand: no-op
  engine->promote(99);  // unknown: no-op
  EXPECT_EQ(engine->pending(), 5u);
  EXPECT_EQ(reap_order(*engine), (std::vector<uint64_t>{0, 4, 3, 1, 2}));
}

TEST_P(IoEngineTest, ReapWaitsForMinCountAndFillsAtMostOutSize) {
  File file = File::open(path_);
  auto engine = make(4);
  ReadCompletion out[16];
  EXPECT_EQ(engine->reap(out, 5), 0u);  // nothing pending: returns at once
  std::vector<uint8_t> buffer(10 * kPage);
  for (uint64_t tag = 0; tag < 10; ++tag) {
    engine->submit(request(file.fd(), tag * kPage, kPage, buffer.data() + tag * kPage, tag));
  }
  EXPECT_EQ(engine->reap(std::span(out, 3), 100), 3u);  // waits for all 10, hands back 3
  EXPECT_EQ(engine->pending(), 7u);
  EXPECT_EQ(engine->reap(out, 0), 7u);  // already complete: a poll collects them
  EXPECT_EQ(engine->pending(), 0u);
  engine->submit(request(file.fd(), 0, 0, buffer.data(), 42));  // empty read: completes at once
  EXPECT_EQ(engine->reap(out, 1), 1u);
  EXPECT_EQ(out[0].tag, 42u);
  EXPECT_EQ(out[0].error, 0);
}

TEST_P(IoEngineTest, DestroysSafelyWithReadsInFlight) {
  File file = File::open(path_);
  auto direct = open_direct();
  constexpr int kReads = 64;
  constexpr uint64_t kLength = 64 * kPage;
  AlignedBuffer buffer(kReads * kLength);  // [kReads][kLength], outlives every engine
  for (int depth : {2, 8}) {
    for (bool reap_some : {false, true}) {
      auto engine = make(depth);
      for (int i = 0; i < kReads; ++i) {
        int fd = direct && i % 2 ? direct->fd() : file.fd();
        engine->submit(request(fd, (i % 16) * kLength, kLength, buffer.data() + i * kLength, i,
                               i % 2 ? IoPriority::kSpeculative : IoPriority::kDemand));
      }
      ReadCompletion out[4];
      if (reap_some) engine->reap(out, 4);
      engine.reset();  // queued reads are dropped, reads in flight land before this returns
      // Nothing may write into the buffers any more: fill them, keep working, look again.
      std::memset(buffer.data(), 0xEE, kReads * kLength);
      auto other = make(depth);
      std::vector<uint8_t> scratch(kPage);
      other->submit(request(file.fd(), 0, kPage, scratch.data(), 0));
      reap_all(*other);
      for (uint64_t i = 0; i < kReads * kLength; i += 997) ASSERT_EQ(buffer.data()[i], 0xEE);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, IoEngineTest,
                         ::testing::Values(IoEngineKind::kUring, IoEngineKind::kPread),
                         [](const ::testing::TestParamInfo<IoEngineKind>& info) {
                           return info.param == IoEngineKind::kUring ? "io_uring" : "pread";
                         });

TEST(IoEngineChoiceTest, AutoPicksIoUringWhenTheKernelAllowsIt) {
  if (kernel_allows_io_uring()) {
    EXPECT_STREQ(make_io_engine(IoEngineKind::kAuto, 8)->name(), "io_uring");
  } else {
    EXPECT_STREQ(make_io_engine(IoEngineKind::kAuto, 8)->name(), "pread");
    EXPECT_THROW(make_io_engine(IoEngineKind::kUring, 8), Error);
  }
  EXPECT_STREQ(make_io_engine(IoEngineKind::kPread, 8)->name(), "pread");
}

TEST(IoEngineChoiceTest, ParsesKindsAndNamesABadOne) {
  EXPECT_EQ(parse_io_engine_kind("auto"), IoEngineKind::kAuto);
  EXPECT_EQ(parse_io_engine_kind("io_uring"), IoEngineKind::kUring);
  EXPECT_EQ(parse_io_engine_kind("pread"), IoEngineKind::kPread);
  try {
    parse_io_engine_kind("uring");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'uring'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_io_engine_kind(nullptr), Error);
}

TEST(IoEngineChoiceTest, RejectsQueueDepthOutOfRange) {
  EXPECT_THROW(make_io_engine(IoEngineKind::kPread, 0), Error);
  EXPECT_THROW(make_io_engine(IoEngineKind::kAuto, -3), Error);
  EXPECT_THROW(make_io_engine(IoEngineKind::kUring, 1 << 20), Error);
}

}  // namespace
}  // namespace sluice
