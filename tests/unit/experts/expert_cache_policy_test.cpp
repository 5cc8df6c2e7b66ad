// The expert cache's policies on a real file: plain LRU against LRU+frequency, per-layer slot
// budgets from a saved usage profile, pre-warm from a profile, merged reads of experts adjacent
// on disk (both I/O engines), and the profile file itself (round trip, bad and mismatched files).
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "core/error.h"
#include "experts/expert_cache.h"
#include "experts/expert_profile.h"

namespace sluice::experts {
namespace {

constexpr uint64_t kExpertBytes = 4096;
constexpr int64_t kExperts = 8;

// A file of n_layer * kExperts experts, one 4 KiB part each, stored back to back (as in an
// expert-major sidecar); every byte of expert e of layer l is 16 * l + e.
class PolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::path(::testing::TempDir()) /
             ("sluice_policy_" + std::to_string(::getpid()) + ".bin"))
                .string();
    std::ofstream out(path_, std::ios::binary);
    for (int l = 0; l < 3; ++l) {
      for (int e = 0; e < kExperts; ++e) {
        const std::vector<char> bytes(kExpertBytes, char(16 * l + e));
        out.write(bytes.data(), std::streamsize(bytes.size()));
      }
    }
  }
  void TearDown() override { std::remove(path_.c_str()); }

  ExpertLayout layout(int n_layer, int64_t n_used) const {
    ExpertLayout l;
    l.files.push_back(std::make_shared<File>(File::open(path_)));
    l.n_expert_used = n_used;
    l.layers.resize(size_t(n_layer));
    for (int il = 0; il < n_layer; ++il) {
      ExpertTensor& part = l.layers[size_t(il)].parts[size_t(ExpertPart::kGate)];
      l.layers[size_t(il)].n_expert = kExperts;
      part.name = "blk." + std::to_string(il) + ".ffn_gate_exps.weight";
      part.type = QType::Q8_0;
      part.n_cols = 128;
      part.n_rows = 32;
      part.offset = uint64_t(il) * kExperts * kExpertBytes;
      part.expert_stride = part.expert_bytes = kExpertBytes;
    }
    return l;
  }

  // Acquires each id of `ids` in turn (one token each), checks the bytes, returns the hits.
  static uint64_t run(ExpertCache& cache, int64_t layer, const std::vector<int32_t>& ids) {
    for (const int32_t id : ids) {
      const int32_t one[] = {id};
      cache.acquire(layer, one);
      const ExpertWeights w = cache.wait(layer, id);
      EXPECT_EQ(static_cast<const char*>(w.parts[0].data)[100], char(16 * layer + id));
      cache.release(layer);
      cache.end_step();
    }
    return cache.stats().total.hits;
  }

  std::string path_;
};

TEST_F(PolicyTest, FrequencyKeepsAnExpertManyTokensChoseWherePlainLruDropsIt) {
  const ExpertLayout l = layout(1, 1);
  // A three times, then B and C: C's miss evicts A under LRU (A is older than B) but B under
  // LRU+frequency (A's three uses outweigh B's recency), so the final A is a hit only there.
  const std::vector<int32_t> ids = {0, 0, 0, 1, 2, 0};
  ExpertCache lru(l, {.n_slots = 2, .policy = EvictionPolicy::kLru});
  ExpertCache frequency(l, {.n_slots = 2, .policy = EvictionPolicy::kLruFrequency});
  EXPECT_EQ(run(lru, 0, ids), 2u);
  EXPECT_EQ(run(frequency, 0, ids), 3u);
}

TEST_F(PolicyTest, ProfileBudgetsGiveSlotsToTheLayerThatSpreadsItsChoices) {
  const ExpertLayout l = layout(2, 1);
  ExpertProfile profile = ExpertProfile::for_layout(l);
  profile.layers[0].uses = {100, 0, 0, 0, 0, 0, 0, 0};    // one expert does everything
  profile.layers[1].uses = {20, 20, 20, 20, 1, 1, 0, 0};  // four share the work
  const std::vector<int64_t> budget = layer_budgets_from_profile(profile, 6, 1);
  EXPECT_EQ(budget, (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(layer_budgets_from_profile(profile, 100, 1), (std::vector<int64_t>{8, 8}));

  // Layer 1 cycling over four experts: with the profile's 5 slots every round after the first
  // hits; with the equal split (3 each) LRU cycling never hits.
  const std::vector<int32_t> cycle = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3};
  ExpertCache by_profile(l, {.n_slots = 6,
                             .policy = EvictionPolicy::kLru,
                             .per_layer_pools = true,
                             .layer_slots = budget});
  ExpertCache equal(l, {.n_slots = 6, .policy = EvictionPolicy::kLru, .per_layer_pools = true});
  EXPECT_EQ(run(by_profile, 1, cycle), 8u);
  EXPECT_EQ(run(equal, 1, cycle), 0u);
  EXPECT_EQ(by_profile.stats().slots, 6u);

  EXPECT_THROW(ExpertCache(l, {.n_slots = 6, .per_layer_pools = true, .layer_slots = {0, 6}}),
               Error);                                                         // below the floor
  EXPECT_THROW(ExpertCache(l, {.n_slots = 6, .layer_slots = {3, 3}}), Error);  // size pools
}

TEST_F(PolicyTest, PrewarmLoadsTheMostUsedExpertsBeforeTheFirstToken) {
  const ExpertLayout l = layout(2, 1);
  ExpertProfile profile = ExpertProfile::for_layout(l);
  profile.layers[0].uses = {0, 0, 9, 0, 0, 7, 0, 0};
  profile.layers[1].uses = {0, 8, 0, 0, 0, 0, 0, 1};
  ExpertCache cache(l, {.n_slots = 3});
  EXPECT_EQ(cache.prewarm(profile), 3);  // (0,2), (1,1), (0,5): (1,7) does not fit
  EXPECT_EQ(cache.stats().prewarm.experts_read, 3u);
  EXPECT_EQ(cache.stats().prewarm.bytes_read, 3 * kExpertBytes);
  EXPECT_EQ(cache.stats().last_step.experts_read, 0u);  // not counted in any step
  EXPECT_EQ(run(cache, 0, {2, 5}), 2u);
  EXPECT_EQ(run(cache, 1, {1}), 3u);
  EXPECT_EQ(run(cache, 1, {7}), 3u);  // not pre-warmed: a miss
}

void expect_merged_reads(const ExpertLayout& l, IoEngineKind engine) {
  for (const bool merge : {true, false}) {
    ExpertCache cache(l, {.n_slots = 8, .io_engine = engine, .merge_reads = merge});
    const int32_t ids[] = {5, 3, 4, 0};  // 3, 4, 5 adjacent on disk; 0 alone
    cache.acquire(1, ids);
    for (const int32_t id : ids) {
      const ExpertWeights w = cache.wait(1, id);
      const auto* bytes = static_cast<const char*>(w.parts[0].data);
      EXPECT_EQ(bytes[0], char(16 + id));
      EXPECT_EQ(bytes[kExpertBytes - 1], char(16 + id));
    }
    cache.release(1);
    cache.end_step();
    EXPECT_EQ(cache.stats().total.experts_read, 4u);
    EXPECT_EQ(cache.stats().total.bytes_read, 4 * kExpertBytes);
    EXPECT_EQ(cache.stats().total.reads, merge ? 2u : 4u) << "merge " << merge;
  }
}

TEST_F(PolicyTest, AdjacentMissesAreOneReadWithIoUring) {
  expect_merged_reads(layout(2, 1), IoEngineKind::kAuto);
}

TEST_F(PolicyTest, AdjacentMissesAreOneReadWithPread) {
  expect_merged_reads(layout(2, 1), IoEngineKind::kPread);
}

TEST_F(PolicyTest, ProfileRecordsSavesAndLoads) {
  const ExpertLayout l = layout(2, 2);
  ExpertCache cache(l, {.n_slots = 4, .record_profile = true});
  for (int t = 0; t < 3; ++t) {
    const int32_t first[] = {1, 6};
    const int32_t second[] = {2, 6};
    cache.acquire(0, first);
    cache.release(0);
    cache.acquire(1, t == 2 ? std::span<const int32_t>(first) : std::span<const int32_t>(second));
    cache.release(1);
    cache.end_step();
  }
  // A prefill chunk's union (more than n_expert_used): uses count, pairs and tokens do not.
  const int32_t chunk[] = {3, 4, 5};
  cache.acquire(0, chunk);
  cache.release(0);
  cache.end_step();
  const std::string file = path_ + ".profile.json";
  cache.profile()->save(file);
  const ExpertProfile loaded = ExpertProfile::load(file);
  std::remove(file.c_str());
  EXPECT_EQ(loaded.tokens, 3u);
  EXPECT_EQ(loaded.layers[0].uses[1], 3u);
  EXPECT_EQ(loaded.layers[0].uses[4], 1u);
  EXPECT_EQ(loaded.layers[0].together[3 * kExperts + 4], 0u);
  EXPECT_EQ(loaded.layers[1].uses[2], 2u);
  EXPECT_EQ(loaded.layers[1].together[2 * kExperts + 6], 2u);
  EXPECT_EQ(loaded.layers[1].together[6 * kExperts + 1], 1u);
  loaded.check_matches(l, file);
  EXPECT_THROW(loaded.check_matches(layout(3, 2), file), Error);
}

TEST_F(PolicyTest, BadProfilesAreOneLineErrors) {
  const std::string file = path_ + ".bad.json";
  for (const char* text : {"not json", R"({"format": "something else", "version": 1})",
                           R"({"format": "sluice expert profile", "version": 1, "n_layer": 1,
                               "n_expert_used": 1, "tokens": 1,
                               "layers": [{"layer": 0, "n_expert": 4, "uses": [1, 2],
                                           "together": []}]})"}) {
    std::ofstream(file) << text;
    try {
      ExpertProfile::load(file);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
      EXPECT_NE(std::string(e.what()).find(file), std::string::npos);
    }
  }
  std::remove(file.c_str());
  EXPECT_THROW(ExpertProfile::load(file), Error);  // missing
}

TEST(CoactivationOrder, ChainsExpertsChosenTogether) {
  ExpertProfile::Layer layer;
  layer.n_expert = 6;
  layer.uses = {1, 9, 1, 5, 1, 5};
  layer.together.assign(36, 0);
  const auto pair = [&](int a, int b, uint32_t n) {
    layer.together[a * 6 + b] = layer.together[b * 6 + a] = n;
  };
  pair(1, 4, 7);  // 1 most often with 4, 4 with 0
  pair(4, 0, 3);
  pair(3, 5, 2);
  // Start at the most used (1), chain 1-4-0; restart at the most used left (3), chain 3-5; 2.
  EXPECT_EQ(coactivation_order(layer), (std::vector<int32_t>{1, 4, 0, 3, 5, 2}));
  layer.together.assign(36, 0);
  layer.uses.assign(6, 0);
  EXPECT_EQ(coactivation_order(layer), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
}

}  // namespace
}  // namespace sluice::experts
