// Recorded steps replayed without recording them again (cuda_step_graph.h): a small decode step —
// the token id uploaded, its embedding row, rms_norm, q and k/v products, RoPE, the KV write,
// attention over the cache, downloads of the output and of the whole cache — is recorded once
// and replayed at the next positions, and after every step its output and KV cells must be BIT-
// EQUAL to the same step run op by op by a second backend on its own, identical buffers (the
// same kernels on the same device: nothing may differ but the position read from the graph's
// parameter table). Three caches: a plain one whose span crosses an attention bucket (the step
// falls back once, then captures anew), a sliding window, a ring smaller than the positions. A
// step whose ops change, or an op run outside a recorded step, must make the next recorded step
// capture anew, counted; downloads into pinned output memory land there at every replay. Fresh
// random data each run (the seed in every failure message). Skips visibly without the CUDA
// backend or a device.
#include <gtest/gtest.h>

#ifdef SLUICE_HAVE_CUDA

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.h"
#include "backend/quant_test_data.h"
#include "core/half.h"
#include "sluice/error.h"

namespace sluice::test {
namespace {

constexpr int64_t kVocab = 64, kEmbd = 256, kHead = 4, kHeadKv = 2, kHeadDim = 64;
constexpr int64_t kQ = kHead * kHeadDim, kKv = kHeadKv * kHeadDim;
// Attention plans decode splits per 256 cells of visible span (cuda_ops.h's
// kAttentionSpanBucket): a recording serves every position of one bucket.
constexpr int64_t kSpanBucket = 256;

// One step's buffers in one backend's memory: the activations and the layer's F16 cache.
struct StepBuffers {
  StepBuffers(Backend& backend, int64_t capacity) : backend(backend), capacity(capacity) {
    ids = backend.allocate(sizeof(int32_t));
    x = backend.allocate(kEmbd * 4);
    xn = backend.allocate(kEmbd * 4);
    q = backend.allocate(kQ * 4);
    k = backend.allocate(kKv * 4);
    v = backend.allocate(kKv * 4);
    out = backend.allocate(kQ * 4);
    spare = backend.allocate(kQ * 4);
    k_cache = backend.allocate(cache_bytes());
    v_cache = backend.allocate(cache_bytes());
  }
  ~StepBuffers() {
    for (void* p : {ids, x, xn, q, k, v, out, spare, k_cache, v_cache}) backend.deallocate(p);
  }
  StepBuffers(const StepBuffers&) = delete;
  StepBuffers& operator=(const StepBuffers&) = delete;
  size_t cache_bytes() const { return size_t(capacity * kKv * 2); }
  KvLayerView view() const {
    return {KvElement::kF16, k_cache, v_cache, capacity, kHeadKv, kHeadDim, kHeadDim};
  }

  Backend& backend;
  int64_t capacity;
  void *ids, *x, *xn, *q, *k, *v, *out, *spare, *k_cache, *v_cache;
};

// What a step gives the host.
struct StepResult {
  std::vector<float> out = std::vector<float>(size_t(kQ));
  std::vector<uint16_t> k_cells, v_cells;
};

enum class Change { kNone, kOneOpMore, kOneOpLess };

class CudaStepReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device present";
    recorded_ = std::make_unique<cuda::CudaBackend>();
    plain_ = std::make_unique<cuda::CudaBackend>();
    seed_ = uint32_t(std::chrono::steady_clock::now().time_since_epoch().count());
    rng_.seed(seed_);
    embeddings_ = random_weight_rows(QType::Q8_0, kVocab, kEmbd, rng_);
    wq_ = random_weight_rows(QType::Q4_K, kQ, kEmbd, rng_);
    wk_ = random_weight_rows(QType::Q4_K, kKv, kEmbd, rng_);
    wv_ = random_weight_rows(QType::Q4_K, kKv, kEmbd, rng_);
    std::uniform_real_distribution<float> dist(0.5f, 1.5f);
    norm_.resize(size_t(kEmbd));
    for (float& w : norm_) w = dist(rng_);
  }

  std::string where() const { return "seed " + std::to_string(seed_); }

  // The same random cells in both caches: attention reads a history it did not write.
  void fill_caches(StepBuffers& a, StepBuffers& b) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<uint16_t> cells(a.cache_bytes() / 2);
    for (void* a_cache : {a.k_cache, a.v_cache}) {
      for (uint16_t& c : cells) c = fp32_to_fp16(dist(rng_));
      void* b_cache = a_cache == a.k_cache ? b.k_cache : b.v_cache;
      a.backend.upload(a_cache, cells.data(), a.cache_bytes());
      b.backend.upload(b_cache, cells.data(), b.cache_bytes());
    }
  }

  // The decode step at `pos`, op by op on `s.backend` (recorded or not: the caller decides).
  void step(StepBuffers& s, int64_t pos, int64_t window, int32_t token, StepResult& r,
            Change change = Change::kNone) {
    Backend& b = s.backend;
    const auto f = [](void* p) { return static_cast<float*>(p); };
    b.upload(s.ids, &token, sizeof token);
    b.get_rows({QType::Q8_0, embeddings_.data(), kEmbd, kVocab}, static_cast<int32_t*>(s.ids), 1,
               f(s.x));
    b.rms_norm(f(s.x), norm_.data(), f(s.xn), 1, kEmbd, 1e-5f);
    b.matmul({QType::Q4_K, wq_.data(), kEmbd, kQ}, f(s.xn), f(s.q), 1);
    const MatrixView kv_weights[2] = {{QType::Q4_K, wk_.data(), kEmbd, kKv},
                                      {QType::Q4_K, wv_.data(), kEmbd, kKv}};
    float* const kv_out[2] = {f(s.k), f(s.v)};
    b.matmul_shared_input(kv_weights, kv_out, 2, f(s.xn), 1);
    RopeConfig rope;
    rope.style = RopeStyle::kNeox;
    rope.n_rot = kHeadDim;
    b.rope(f(s.q), 1, kHead, kHeadDim, pos, rope);
    b.rope(f(s.k), 1, kHeadKv, kHeadDim, pos, rope);
    b.kv_store(s.view(), f(s.k), f(s.v), 1, pos);
    AttentionCall call;
    call.q = f(s.q);
    call.out = f(s.out);
    call.n_tokens = 1;
    call.n_head = kHead;
    call.pos0 = pos;
    call.window = window;
    call.scale = 0.125f;
    call.kv = s.view();
    b.attention(call);
    if (change == Change::kOneOpMore) b.copy(s.spare, s.out, size_t(kQ) * 4);
    r.k_cells.resize(s.cache_bytes() / 2);
    r.v_cells.resize(s.cache_bytes() / 2);
    b.download(r.out.data(), s.out, r.out.size() * 4);
    b.download(r.k_cells.data(), s.k_cache, s.cache_bytes());
    if (change != Change::kOneOpLess) b.download(r.v_cells.data(), s.v_cache, s.cache_bytes());
  }

  // As LoadedModel::forward: the step recorded; when that throws, aborted and run unrecorded.
  // True when the recorded step ran.
  bool recorded_step(StepBuffers& s, int64_t pos, int64_t window, int32_t token, StepResult& r,
                     Change change = Change::kNone) {
    EXPECT_TRUE(recorded_->begin_recorded_step());
    try {
      step(s, pos, window, token, r, change);
      recorded_->end_recorded_step();
      return true;
    } catch (const Error&) {
      recorded_->abort_recorded_step();
      step(s, pos, window, token, r);
      return false;
    }
  }

  void expect_same(const StepResult& got, const StepResult& expected, const std::string& what) {
    ASSERT_EQ(std::memcmp(got.out.data(), expected.out.data(), got.out.size() * 4), 0)
        << what << ": output differs (" << where() << ")";
    ASSERT_EQ(got.k_cells, expected.k_cells) << what << ": K cells differ (" << where() << ")";
    ASSERT_EQ(got.v_cells, expected.v_cells) << what << ": V cells differ (" << where() << ")";
  }

  int32_t token() { return int32_t(rng_() % kVocab); }

  // Steps p0 … p0 + n_steps - 1 recorded (after one plain step at p0 - 1, which meets the
  // weights and sizes, as a decode step after a decode step does), each compared with the
  // plain backend's. Counts: a step whose span bucket differs from the recording's falls back to
  // a plain step, the next one captures, the others replay.
  void replay_positions(int64_t capacity, int64_t window, int64_t p0, int64_t n_steps) {
    StepBuffers rec(*recorded_, capacity), ref(*plain_, capacity);
    fill_caches(rec, ref);
    StepResult got[2], expected;  // two host destinations, alternating: downloads are per step
    int32_t t = token();
    step(rec, p0 - 1, window, t, got[0]);
    step(ref, p0 - 1, window, t, expected);
    expect_same(got[0], expected, "plain step");
    const uint64_t captures0 = recorded_->captured_steps();
    const uint64_t replays0 = recorded_->replayed_steps();
    bool held = false;
    int64_t held_bucket = 0;
    uint64_t want_captures = 0, want_replays = 0;
    for (int64_t pos = p0; pos < p0 + n_steps; ++pos) {
      const int64_t first = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
      const int64_t bucket = (pos + 1 - first + kSpanBucket - 1) / kSpanBucket;
      const bool falls_back = held && bucket != held_bucket;
      want_captures += !held;
      want_replays += held && !falls_back;
      held = !falls_back;
      held_bucket = bucket;
      t = token();
      StepResult& r = got[pos % 2];
      EXPECT_EQ(recorded_step(rec, pos, window, t, r), !falls_back) << "position " << pos;
      step(ref, pos, window, t, expected);
      expect_same(r, expected, "position " + std::to_string(pos));
    }
    EXPECT_EQ(recorded_->captured_steps() - captures0, want_captures) << where();
    EXPECT_EQ(recorded_->replayed_steps() - replays0, want_replays) << where();
    EXPECT_GE(want_replays, uint64_t(n_steps) - 3);
  }

  std::unique_ptr<cuda::CudaBackend> recorded_, plain_;
  std::vector<uint8_t> embeddings_, wq_, wk_, wv_;
  std::vector<float> norm_;
  uint32_t seed_ = 0;
  std::mt19937 rng_;
};

// Spans 501 … 541 with 64-dim heads (64-cell tiles): the bucket 257 … 512 is planned for 512
// cells, 4 splits of 128; at position 512 the span enters 513 … 768, planned as 6 splits of 128
// (the last one empty until the span passes 640): that step runs plain, the next captures anew.
TEST_F(CudaStepReplayTest, ReplayedStepsEqualPlainOnesAcrossASpanBucket) {
  replay_positions(576, 0, 500, 41);
}

// A window of 300: every span is 300 cells (2 splits, the second partly past the window's end),
// the recording stays while the cells seen slide.
TEST_F(CudaStepReplayTest, ReplayedStepsEqualPlainOnesWithASlidingWindow) {
  replay_positions(576, 300, 500, 41);
}

// A ring of 384 cells for a window of 300 at positions 500 … 540: cell = position % 384.
TEST_F(CudaStepReplayTest, ReplayedStepsEqualPlainOnesOnARing) {
  replay_positions(384, 300, 500, 41);
}

// One op more (it throws where the recording has none) or one op less (end_recorded_step
// throws): the step runs plain, the recording is dropped and the next recorded step captures
// anew, with the right numbers. So does any op run outside a recorded step.
TEST_F(CudaStepReplayTest, ChangedStepsAndPlainOpsMakeTheNextStepCapture) {
  StepBuffers rec(*recorded_, 256), ref(*plain_, 256);
  fill_caches(rec, ref);
  StepResult got, expected;
  int64_t pos = 100;
  int32_t t = token();
  step(rec, pos, 0, t, got);
  step(ref, pos, 0, t, expected);
  const auto next = [&](Change change, bool runs_recorded, uint64_t captures, uint64_t replays,
                        const std::string& what) {
    ++pos;
    t = token();
    const uint64_t c0 = recorded_->captured_steps(), r0 = recorded_->replayed_steps();
    EXPECT_EQ(recorded_step(rec, pos, 0, t, got, change), runs_recorded) << what;
    step(ref, pos, 0, t, expected);
    expect_same(got, expected, what);
    EXPECT_EQ(recorded_->captured_steps() - c0, captures) << what;
    EXPECT_EQ(recorded_->replayed_steps() - r0, replays) << what;
  };
  next(Change::kNone, true, 1, 0, "first recorded step: a capture");
  next(Change::kNone, true, 0, 1, "second: a replay");
  next(Change::kOneOpMore, false, 0, 0, "one op more: runs plain");
  next(Change::kNone, true, 1, 0, "after one op more: a capture");
  next(Change::kNone, true, 0, 1, "then a replay");
  next(Change::kOneOpLess, false, 0, 0, "one op less: runs plain");
  next(Change::kNone, true, 1, 0, "after one op less: a capture");
  next(Change::kNone, true, 0, 1, "then a replay");
  recorded_->scale(static_cast<float*>(rec.spare), 2.0f, kQ);  // unrecorded, between steps
  next(Change::kNone, true, 1, 0, "after an unrecorded op: a capture");
  next(Change::kNone, true, 0, 1, "then a replay");
}

// Downloads into memory given to pin_host_output (a session's logits row) are copied there by
// the graph itself: every replay must leave that step's own output there, not the captured
// step's. Another destination is another op (the step runs plain, the next captures); so is
// the same memory once unpinned (staged again).
TEST_F(CudaStepReplayTest, DownloadsIntoPinnedOutputLandDirectly) {
  StepBuffers rec(*recorded_, 256), ref(*plain_, 256);
  fill_caches(rec, ref);
  StepResult pinned, other, expected;
  const size_t out_bytes = pinned.out.size() * sizeof(float);
  ASSERT_TRUE(recorded_->pin_host_output(pinned.out.data(), out_bytes)) << where();
  int64_t pos = 100;
  int32_t t = token();
  step(rec, pos, 0, t, pinned);
  step(ref, pos, 0, t, expected);
  expect_same(pinned, expected, "plain step into pinned output");
  const auto next = [&](StepResult& r, bool runs_recorded, uint64_t captures, uint64_t replays,
                        const std::string& what) {
    ++pos;
    t = token();
    std::fill(r.out.begin(), r.out.end(), std::nanf(""));  // poisoned: the step must write it
    const uint64_t c0 = recorded_->captured_steps(), r0 = recorded_->replayed_steps();
    EXPECT_EQ(recorded_step(rec, pos, 0, t, r), runs_recorded) << what;
    step(ref, pos, 0, t, expected);
    expect_same(r, expected, what);
    EXPECT_EQ(recorded_->captured_steps() - c0, captures) << what;
    EXPECT_EQ(recorded_->replayed_steps() - r0, replays) << what;
  };
  next(pinned, true, 1, 0, "pinned: a capture");
  for (int i = 0; i < 3; ++i) next(pinned, true, 0, 1, "pinned: a replay");
  next(other, false, 0, 0, "another destination: runs plain");
  next(other, true, 1, 0, "then a capture (staged)");
  next(pinned, false, 0, 0, "back to the pinned row: runs plain");
  next(pinned, true, 1, 0, "then a capture");
  next(pinned, true, 0, 1, "then a replay");
  recorded_->unpin_host_output(pinned.out.data());
  next(pinned, true, 1, 0, "unpinned: a capture (staged)");
  next(pinned, true, 0, 1, "then a replay");
}

}  // namespace
}  // namespace sluice::test

#else

TEST(CudaStepReplayTest, Skipped) {
  GTEST_SKIP() << "CUDA backend not built (no nvcc at configure time)";
}

#endif
