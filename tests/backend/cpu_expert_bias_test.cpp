// CpuBackend's per-expert row ops, the stacked MoE paths' form of the per-expert path's ops:
// add_expert_bias (each row plus its expert's row of a bias table) against add_bias of each row's
// bias row, and scale_expert_rows (each row times its expert's scale) against scale — bit for
// bit on fresh random data (the seed in every failure message), repeated experts included. Ids
// outside the table are refused with an error naming the op.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace sluice::test {
namespace {

constexpr int64_t kExperts = 6, kRows = 9, kCols = 37;

// op(x, table, ids) against reference(row, its expert's id) applied row by row; the table holds
// table_per_expert floats per expert.
void expect_rows_match(
    int64_t table_per_expert, const std::function<void(float*, const float*, const int32_t*)>& op,
    const std::function<void(float* row, const float* table, int32_t id)>& reference) {
  const uint32_t seed = uint32_t(std::chrono::steady_clock::now().time_since_epoch().count());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  std::vector<float> table(size_t(kExperts * table_per_expert)), x(size_t(kRows * kCols));
  for (float& v : table) v = value(rng);
  for (float& v : x) v = value(rng);
  std::vector<int32_t> ids(static_cast<size_t>(kRows));
  std::uniform_int_distribution<int32_t> expert(0, kExperts - 1);
  for (int32_t& id : ids) id = expert(rng);
  ids[1] = ids[0];  // a repeated expert

  std::vector<float> want = x;
  for (int64_t r = 0; r < kRows; ++r)
    reference(want.data() + r * kCols, table.data(), ids[size_t(r)]);
  std::vector<float> got = x;
  op(got.data(), table.data(), ids.data());
  ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "seed " << seed;
  EXPECT_NE(std::memcmp(got.data(), x.data(), got.size() * sizeof(float)), 0) << "seed " << seed;
}

void expect_refuses_outside_ids(
    const std::string& name, const std::function<void(float*, const float*, const int32_t*)>& op) {
  std::vector<float> x(8, 1.0f), table(16, 1.0f);
  for (const int32_t bad : {4, -1}) {
    const int32_t ids[] = {0, bad};
    try {
      op(x.data(), table.data(), ids);  // 4 experts, 2 rows of 4
      ADD_FAILURE() << name << ": id " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
}

TEST(CpuExpertBias, EachRowGetsItsExpertsBiasRow) {
  cpu::CpuBackend cpu(nullptr);
  expect_rows_match(
      kCols,
      [&](float* x, const float* table, const int32_t* ids) {
        cpu.add_expert_bias(x, table, kExperts, ids, kRows, kCols);
      },
      [&](float* row, const float* table, int32_t id) {
        cpu.add_bias(row, table + id * kCols, 1, kCols);
      });
}

TEST(CpuExpertBias, RefusesIdsOutsideTheTable) {
  cpu::CpuBackend cpu(nullptr);
  expect_refuses_outside_ids("add_expert_bias", [&](float* x, const float* t, const int32_t* ids) {
    cpu.add_expert_bias(x, t, 4, ids, 2, 4);
  });
}

TEST(CpuExpertScale, EachRowTimesItsExpertsScale) {
  cpu::CpuBackend cpu(nullptr);
  expect_rows_match(
      1,
      [&](float* x, const float* scales, const int32_t* ids) {
        cpu.scale_expert_rows(x, scales, kExperts, ids, kRows, kCols);
      },
      [&](float* row, const float* scales, int32_t id) { cpu.scale(row, scales[id], kCols); });
}

TEST(CpuExpertScale, RefusesIdsOutsideTheTable) {
  cpu::CpuBackend cpu(nullptr);
  expect_refuses_outside_ids("scale_expert_rows",
                             [&](float* x, const float* t, const int32_t* ids) {
                               cpu.scale_expert_rows(x, t, 4, ids, 2, 4);
                             });
}

}  // namespace
}  // namespace sluice::test
