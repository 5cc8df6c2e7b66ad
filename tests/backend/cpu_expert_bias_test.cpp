// CpuBackend::add_expert_bias — each row plus its expert's row of a bias table, the stacked MoE
// paths' form of the per-expert path's add_bias — against add_bias of each row's bias row: bit
// for bit on fresh random data (the seed in every failure message), repeated experts included.
// Ids outside the table are refused with an error. The same for scale_expert_rows (each row times
// its expert's scale) against scale.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace sluice::test {
namespace {

TEST(CpuExpertBias, EachRowGetsItsExpertsBiasRow) {
  const uint32_t seed = uint32_t(std::chrono::steady_clock::now().time_since_epoch().count());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  constexpr int64_t kExperts = 6, kRows = 9, kCols = 37;
  std::vector<float> table(size_t(kExperts * kCols)), x(size_t(kRows * kCols));
  for (float& v : table) v = value(rng);
  for (float& v : x) v = value(rng);
  std::vector<int32_t> ids(static_cast<size_t>(kRows));
  std::uniform_int_distribution<int32_t> expert(0, kExperts - 1);
  for (int32_t& id : ids) id = expert(rng);
  ids[1] = ids[0];  // a repeated expert

  cpu::CpuBackend cpu(nullptr);
  std::vector<float> want = x;
  for (int64_t r = 0; r < kRows; ++r) {
    cpu.add_bias(want.data() + r * kCols, table.data() + ids[size_t(r)] * kCols, 1, kCols);
  }
  std::vector<float> got = x;
  cpu.add_expert_bias(got.data(), table.data(), kExperts, ids.data(), kRows, kCols);
  ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "seed " << seed;
  EXPECT_NE(std::memcmp(got.data(), x.data(), got.size() * sizeof(float)), 0) << "seed " << seed;
}

TEST(CpuExpertBias, RefusesIdsOutsideTheTable) {
  cpu::CpuBackend cpu(nullptr);
  std::vector<float> x(8, 1.0f), table(16, 1.0f);
  for (const int32_t bad : {4, -1}) {
    const int32_t ids[] = {0, bad};
    try {
      cpu.add_expert_bias(x.data(), table.data(), 4, ids, 2, 4);
      ADD_FAILURE() << "id " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("add_expert_bias"), std::string::npos) << e.what();
    }
  }
}

TEST(CpuExpertScale, EachRowTimesItsExpertsScale) {
  const uint32_t seed = uint32_t(std::chrono::steady_clock::now().time_since_epoch().count());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  constexpr int64_t kExperts = 6, kRows = 9, kCols = 37;
  std::vector<float> scales(static_cast<size_t>(kExperts)), x(size_t(kRows * kCols));
  for (float& v : scales) v = value(rng);
  for (float& v : x) v = value(rng);
  std::vector<int32_t> ids(static_cast<size_t>(kRows));
  std::uniform_int_distribution<int32_t> expert(0, kExperts - 1);
  for (int32_t& id : ids) id = expert(rng);
  ids[1] = ids[0];  // a repeated expert

  cpu::CpuBackend cpu(nullptr);
  std::vector<float> want = x;
  for (int64_t r = 0; r < kRows; ++r)
    cpu.scale(want.data() + r * kCols, scales[size_t(ids[size_t(r)])], kCols);
  std::vector<float> got = x;
  cpu.scale_expert_rows(got.data(), scales.data(), kExperts, ids.data(), kRows, kCols);
  ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "seed " << seed;
  EXPECT_NE(std::memcmp(got.data(), x.data(), got.size() * sizeof(float)), 0) << "seed " << seed;
}

TEST(CpuExpertScale, RefusesIdsOutsideTheTable) {
  cpu::CpuBackend cpu(nullptr);
  std::vector<float> x(8, 1.0f), scales(4, 2.0f);
  for (const int32_t bad : {4, -1}) {
    const int32_t ids[] = {0, bad};
    try {
      cpu.scale_expert_rows(x.data(), scales.data(), 4, ids, 2, 4);
      ADD_FAILURE() << "id " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("scale_expert_rows"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace sluice::test
