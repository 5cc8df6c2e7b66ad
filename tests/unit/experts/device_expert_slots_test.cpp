// The device tier of the routed experts, with the CPU backend's memory standing in for the
// device's (the tier only allocates and uploads through the Backend interface): every view
// holds the expert's own bytes, hits cost no copy, the least recently used unpinned slot is the
// one replaced, and an acquire never loses an expert it pinned.
#include "experts/device_expert_slots.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "experts/resident_experts.h"

namespace sluice::experts {
namespace {

constexpr int64_t kExperts = 6;
constexpr uint64_t kGateBytes = 1000;  // not a multiple of the slots' 256-byte part alignment
constexpr uint64_t kDownBytes = 600;

// Layer l, expert e: gate bytes 40 * l + e, down bytes 40 * l + e + 20, back to back per layer.
class DeviceSlotsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::path(::testing::TempDir()) /
             ("sluice_device_slots_" + std::to_string(::getpid()) + ".bin"))
                .string();
    std::ofstream out(path_, std::ios::binary);
    for (int l = 0; l < 2; ++l) {
      for (uint64_t bytes : {kGateBytes, kDownBytes}) {
        for (int e = 0; e < kExperts; ++e) {
          const char value = char(40 * l + e + (bytes == kDownBytes ? 20 : 0));
          const std::vector<char> data(bytes, value);
          out.write(data.data(), std::streamsize(data.size()));
        }
      }
    }
    out.close();
    layout_.files.push_back(std::make_shared<File>(File::open(path_)));
    layout_.n_expert_used = 2;
    layout_.layers.resize(2);
    uint64_t offset = 0;
    for (int l = 0; l < 2; ++l) {
      layout_.layers[size_t(l)].n_expert = kExperts;
      for (ExpertPart p : {ExpertPart::kGate, ExpertPart::kDown}) {
        ExpertTensor& t = layout_.layers[size_t(l)].parts[size_t(p)];
        const uint64_t bytes = p == ExpertPart::kGate ? kGateBytes : kDownBytes;
        t.name = "blk." + std::to_string(l) + "." + expert_part_name(p);
        t.type = QType::Q8_0;
        t.n_cols = 32;
        t.n_rows = 1;
        t.offset = offset;
        t.expert_stride = t.expert_bytes = bytes;
        offset += bytes * kExperts;
      }
    }
  }
  void TearDown() override { std::remove(path_.c_str()); }

  // The same experts stored expert-major, as `sluice repack` does: per expert its gate, 24
  // bytes of padding (0x7f), its down, 40 more: the parts lie as a slot lays them out (the gate
  // rounded up to 256 bytes).
  void make_expert_major() {
    constexpr uint64_t kExtent = 1024 + 640;
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    for (int l = 0; l < 2; ++l) {
      for (int e = 0; e < kExperts; ++e) {
        std::vector<char> extent(kExtent, char(0x7f));
        std::fill_n(extent.begin(), kGateBytes, char(40 * l + e));
        std::fill_n(extent.begin() + 1024, kDownBytes, char(40 * l + e + 20));
        out.write(extent.data(), std::streamsize(extent.size()));
      }
    }
    out.close();
    layout_.files.assign(1, std::make_shared<File>(File::open(path_)));
    for (int l = 0; l < 2; ++l) {
      ExpertTensor& gate = layout_.layers[size_t(l)].parts[size_t(ExpertPart::kGate)];
      ExpertTensor& down = layout_.layers[size_t(l)].parts[size_t(ExpertPart::kDown)];
      gate.offset = uint64_t(l) * kExperts * kExtent;
      down.offset = gate.offset + 1024;
      gate.expert_stride = down.expert_stride = kExtent;
    }
  }

  // Downs as large as the gates, stacked as in a GGUF: per layer the gate stack, then the down
  // stack (expert e's down one stack after its gate).
  void make_equal_parts() {
    down_bytes_ = kGateBytes;
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    for (int l = 0; l < 2; ++l) {
      for (int value_offset : {0, 20}) {
        for (int e = 0; e < kExperts; ++e) {
          const std::vector<char> data(kGateBytes, char(40 * l + e + value_offset));
          out.write(data.data(), std::streamsize(data.size()));
        }
      }
    }
    out.close();
    layout_.files.assign(1, std::make_shared<File>(File::open(path_)));
    for (int l = 0; l < 2; ++l) {
      ExpertTensor& gate = layout_.layers[size_t(l)].parts[size_t(ExpertPart::kGate)];
      ExpertTensor& down = layout_.layers[size_t(l)].parts[size_t(ExpertPart::kDown)];
      gate.offset = uint64_t(l) * 2 * kExperts * kGateBytes;
      down.offset = gate.offset + kExperts * kGateBytes;
      down.expert_stride = down.expert_bytes = kGateBytes;
    }
  }

  // Acquires `ids` of `layer` as one token's choice and checks every byte of their views.
  void use(DeviceExpertSlots& slots, int64_t layer, std::vector<int32_t> ids) {
    slots.acquire(layer, ids);
    for (int32_t id : ids) {
      const ExpertWeights w = slots.wait(layer, id);
      const auto* gate = static_cast<const char*>(w.part(ExpertPart::kGate).data);
      const auto* down = static_cast<const char*>(w.part(ExpertPart::kDown).data);
      ASSERT_EQ(down - gate, 1024);  // the gate's 1000 bytes rounded up to 256
      for (uint64_t i = 0; i < kGateBytes; ++i) ASSERT_EQ(gate[i], char(40 * layer + id));
      for (uint64_t i = 0; i < down_bytes_; ++i) ASSERT_EQ(down[i], char(40 * layer + id + 20));
    }
    slots.release(layer);
  }

  std::string path_;
  ExpertLayout layout_;
  uint64_t down_bytes_ = kDownBytes;
  cpu::CpuBackend device_{nullptr};
};

TEST_F(DeviceSlotsTest, CopiesMissesKeepsHitsAndReplacesTheLeastRecentlyUsed) {
  EXPECT_EQ(DeviceExpertSlots::slot_bytes(layout_), 1024u + 768u);
  DeviceExpertSlots slots(std::make_unique<ResidentExperts>(layout_), layout_, device_, 3);
  use(slots, 0, {1, 2});
  use(slots, 1, {1});  // same id, other layer: its own slot
  EXPECT_EQ(slots.device_counters().misses, 3u);
  EXPECT_EQ(slots.device_counters().bytes_copied, 3 * (kGateBytes + kDownBytes));
  use(slots, 0, {2, 1});
  EXPECT_EQ(slots.device_counters().hits, 2u);
  use(slots, 0, {4});  // full: replaces layer 1's expert 1, the least recently used
  use(slots, 0, {1, 2});
  EXPECT_EQ(slots.device_counters().hits, 4u);
  use(slots, 1, {1});
  EXPECT_EQ(slots.device_counters().misses, 5u);
  EXPECT_EQ(slots.host().stats().total.hits + slots.host().stats().last_step.hits, 5u);
}

// Parts that lie in host memory as in the slot go over as one copy, padding between them
// included; the views still hold each part's own bytes.
TEST_F(DeviceSlotsTest, AnExpertWhosePartsLieAsInTheSlotIsOneCopy) {
  make_expert_major();
  DeviceExpertSlots slots(std::make_unique<ResidentExperts>(layout_), layout_, device_, 3);
  use(slots, 0, {1, 2});
  use(slots, 1, {5});
  EXPECT_EQ(slots.device_counters().misses, 3u);
  EXPECT_EQ(slots.device_counters().bytes_copied, 3 * (1024 + kDownBytes));
  EXPECT_EQ(slots.device_counters().copies, 3u);
}

// Parts of one size, each in its own stack, go over as one copy of rows (the GGUF's layout):
// views byte-exact, no padding copied. Parts of different sizes are a copy each.
TEST_F(DeviceSlotsTest, AnExpertsPartsOfOneSizeInTheirStacksAreOneCopyOfRows) {
  {
    DeviceExpertSlots slots(std::make_unique<ResidentExperts>(layout_), layout_, device_, 3);
    use(slots, 0, {1, 2});
    EXPECT_EQ(slots.device_counters().copies, 4u);  // gate 1000 bytes, down 600: a copy each
  }
  make_equal_parts();
  DeviceExpertSlots slots(std::make_unique<ResidentExperts>(layout_), layout_, device_, 3);
  use(slots, 0, {1, 2});
  use(slots, 1, {5});
  use(slots, 0, {2, 5});
  EXPECT_EQ(slots.device_counters().misses, 4u);
  EXPECT_EQ(slots.device_counters().copies, 4u);
  EXPECT_EQ(slots.device_counters().bytes_copied, 4 * 2 * kGateBytes);
}

TEST_F(DeviceSlotsTest, AnAcquireKeepsWhatItPinnedAndIsBoundedByTheSlots) {
  DeviceExpertSlots slots(std::make_unique<ResidentExperts>(layout_), layout_, device_, 2);
  EXPECT_EQ(slots.max_acquire(), 2u);
  use(slots, 0, {0, 1});
  use(slots, 0, {1, 3});  // 1 pinned as a hit: 3 must replace 0, not 1
  use(slots, 0, {1, 3});
  EXPECT_EQ(slots.device_counters().misses, 3u);
  EXPECT_EQ(slots.device_counters().hits, 3u);
  EXPECT_THROW(DeviceExpertSlots(std::make_unique<ResidentExperts>(layout_), layout_, device_, 0),
               Error);
}

// Guesses for the next layer get slots at once when the host tier holds every expert (the
// mapped file), never the slots the current acquire still needs, and are copied from the
// current acquire's last wait on — after its own misses, never sharing the bus with them; a
// guessed expert is then a hit with its own bytes, and a wrong guess is just a slot to replace.
TEST_F(DeviceSlotsTest, PrefetchFillsFreeSlotsAheadAndTheNextAcquireHitsThem) {
  constexpr uint64_t kExpertBytes = kGateBytes + kDownBytes;
  DeviceExpertSlots slots(std::make_unique<ResidentExperts>(layout_), layout_, device_, 4);
  EXPECT_TRUE(slots.wants_prefetch());
  slots.acquire(0, std::vector<int32_t>{1, 2});  // two misses, not loaded until wait()
  const std::vector<int32_t> guesses = {3, 4, 5};
  slots.prefetch(1, guesses);  // 4 slots, 2 owed to the acquire: only 3 and 4 get one
  EXPECT_EQ(slots.device_counters().prefetched, 2u);
  EXPECT_EQ(slots.device_counters().bytes_copied, 0u);
  for (int32_t id : {1, 2}) {
    const ExpertWeights w = slots.wait(0, id);
    EXPECT_EQ(static_cast<const char*>(w.part(ExpertPart::kGate).data)[0], char(id));
    // The first wait copies its miss only; the last, its miss and then the guesses.
    EXPECT_EQ(slots.device_counters().bytes_copied, (id == 1 ? 1 : 4) * kExpertBytes);
  }
  slots.release(0);
  use(slots, 1, {3, 4});
  EXPECT_EQ(slots.device_counters().hits, 2u);
  EXPECT_EQ(slots.device_counters().prefetch_used, 2u);
  EXPECT_EQ(slots.device_counters().misses, 2u);
  use(slots, 1, {5, 0});  // never prefetched: misses
  EXPECT_EQ(slots.device_counters().misses, 4u);
  EXPECT_EQ(slots.device_counters().bytes_copied, 6 * kExpertBytes);
  // A wrong guess: copied, never acquired, so not counted as used.
  slots.acquire(1, std::vector<int32_t>{5});
  slots.prefetch(0, std::vector<int32_t>{3});
  slots.wait(1, 5);
  slots.release(1);
  use(slots, 0, {1});
  EXPECT_EQ(slots.device_counters().prefetched, 3u);
  EXPECT_EQ(slots.device_counters().prefetch_used, 2u);
}

}  // namespace
}  // namespace sluice::experts
