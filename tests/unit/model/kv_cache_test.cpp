// KvCache: ring capacities of full and sliding layers, when a kept prefix can still be continued
// after a sliding ring has moved past it, and recurrent layers that are never rewound.
#include "model/kv_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace sluice::model {
namespace {

cpu::CpuBackend host(nullptr);

TEST(KvCache, SlidingLayersHoldWindowPlusBatch) {
  KvCache kv({{2, 8, 8, 0}, {2, 8, 8, 6}}, 100, 4, KvElement::kF16, host);
  EXPECT_EQ(kv.layer(0).capacity, 100);
  EXPECT_EQ(kv.layer(1).capacity, 9);  // 6 + 4 - 1
  EXPECT_EQ(kv.bytes(), uint64_t(2 * (100 + 9) * 2 * 8 * 2));
}

TEST(KvCache, ReusablePrefixDependsOnWhatTheRingStillHolds) {
  KvCache full({{1, 4, 4, 0}}, 100, 4, KvElement::kF32, host);
  EXPECT_EQ(full.reusable_prefix(50, 90), 50);
  KvCache sliding({{1, 4, 4, 0}, {1, 4, 4, 6}}, 100, 4, KvElement::kF32, host);  // ring of 9
  // Continuing at 10 reads positions 5..; written up to 12: cell of 5 still holds 5.
  EXPECT_EQ(sliding.reusable_prefix(10, 13), 10);
  // Written up to 14 (position 14 overwrote the cell of 5): must start over.
  EXPECT_EQ(sliding.reusable_prefix(10, 15), 0);
  EXPECT_EQ(sliding.reusable_prefix(0, 40), 0);
}

// A recurrent layer keeps a state of every position written: it continues only the whole
// sequence or starts over at 0, and copies only whole.
TEST(KvCache, RecurrentLayersContinueOnlyTheWholeSequence) {
  const KvLayerSpec recurrent{0, 0, 0, 0, 6, 8};
  KvCache kv({{1, 4, 4, 0}, recurrent}, 100, 4, KvElement::kF32, host);
  EXPECT_TRUE(kv.has_recurrent_layers());
  EXPECT_EQ(kv.bytes(), uint64_t(2 * 100 * 4 * 4 + (6 + 8) * 4));
  RecurrentLayerView view = kv.recurrent(1, 0);
  std::fill_n(view.state, 8, 1.0f);
  *view.positions = 12;
  EXPECT_EQ(kv.reusable_prefix(12, 12), 12);
  EXPECT_EQ(kv.reusable_prefix(8, 12), 0);
  EXPECT_EQ(kv.reusable_prefix(13, 13), 0);  // the state is not at the written end
  EXPECT_THROW(kv.recurrent(1, 8), Error);   // cannot rewind
  EXPECT_EQ(kv.recurrent(1, 12).state[0], 1.0f);
  EXPECT_EQ(kv.recurrent(1, 0).state[0], 0.0f);  // a sequence starting over is zeroed
  *kv.recurrent(1, 0).positions = 12;

  KvCache copy({{1, 4, 4, 0}, recurrent}, 100, 4, KvElement::kF32, host);
  EXPECT_THROW(copy.copy_prefix_from(kv, 8, 12), Error);
  copy.copy_prefix_from(kv, 12, 12);
  EXPECT_NO_THROW(copy.recurrent(1, 12));
}

// A continuation copies the cells the source still holds: a full layer's first n, a ring's last
// `capacity` positions, which wrap around its end.
TEST(KvCache, CopyPrefixTakesTheCellsStillHeldAcrossTheRingsWrap) {
  const std::vector<KvLayerSpec> layers{{1, 2, 2, 0}, {1, 2, 2, 6}};  // full, ring of 9
  KvCache source(layers, 100, 4, KvElement::kF32, host);
  for (int64_t layer = 0; layer < 2; ++layer) {
    const KvLayerView view = source.layer(layer);
    for (int64_t cell = 0; cell < view.capacity; ++cell) {
      for (int64_t i = 0; i < 2; ++i) {
        static_cast<float*>(view.k)[cell * 2 + i] = float(1000 * layer + cell);
        static_cast<float*>(view.v)[cell * 2 + i] = float(-1000 * layer - cell);
      }
    }
  }
  KvCache copy(layers, 100, 4, KvElement::kF32, host);
  copy.copy_prefix_from(source, 12, 13);  // ring: positions 3..11, cells 3..8 then 0..2
  const auto* full_k = static_cast<const float*>(copy.layer(0).k);
  for (int64_t cell = 0; cell < 100; ++cell) EXPECT_EQ(full_k[cell * 2], cell < 12 ? cell : 0);
  const auto* ring_k = static_cast<const float*>(copy.layer(1).k);
  const auto* ring_v = static_cast<const float*>(copy.layer(1).v);
  for (int64_t cell = 0; cell < 9; ++cell) {
    EXPECT_EQ(ring_k[cell * 2 + 1], 1000 + cell);
    EXPECT_EQ(ring_v[cell * 2], -1000 - cell);
  }
}

}  // namespace
}  // namespace sluice::model
