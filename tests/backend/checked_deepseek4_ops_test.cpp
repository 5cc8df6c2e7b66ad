// The checked backend's wrappers of DeepSeek V4's ops (hyper_mix … gather_key_cells): each
// refuses an activation that is host memory or runs past its allocation, naming the op and the
// argument, and inside the rules gives the CPU backend's numbers — what makes a deepseek4 run
// under SLUICE_CHECK_BACKEND_MEMORY a proof that its forward keeps to backend memory.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/checked/checked_memory_backend.h"
#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace sluice::test {
namespace {

class CheckedDeepSeek4OpsTest : public ::testing::Test {
 protected:
  CheckedDeepSeek4OpsTest() : checked_(std::make_unique<cpu::CpuBackend>(nullptr)) {
    seed_ = uint32_t(std::chrono::steady_clock::now().time_since_epoch().count());
    rng_.seed(seed_);
  }

  std::vector<float> random(size_t n) {
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng_);
    return v;
  }
  template <class T>
  T* upload(const std::vector<T>& values) {
    auto* p = static_cast<T*>(checked_.allocate(values.size() * sizeof(T)));
    checked_.upload(p, values.data(), values.size() * sizeof(T));
    return p;
  }
  std::vector<float> download(const float* p, size_t n) {
    std::vector<float> out(n);
    checked_.download(out.data(), p, n * sizeof(float));
    return out;
  }
  // The message of the Error `run` throws ("" when none).
  template <class Run>
  static std::string error_of(Run&& run) {
    try {
      run();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  checked::CheckedMemoryBackend checked_;
  cpu::CpuBackend plain_{nullptr};
  uint32_t seed_ = 0;
  std::mt19937 rng_;
};

TEST_F(CheckedDeepSeek4OpsTest, HyperConnectionOpsGiveTheCpusNumbers) {
  const int64_t n = 3, hc = 4, d = 24, width = (2 + hc) * hc;
  const auto mixes = random(size_t(n * width)), scale = random(3), base = random(size_t(width));
  const auto streams = random(size_t(n * hc * d)), branch = random(size_t(n * d));
  std::vector<float> pre(size_t(n * hc)), post(pre.size()), comb(size_t(n * hc * hc));
  std::vector<float> x(size_t(n * d)), out(streams.size());
  plain_.hyper_mix(mixes.data(), scale.data(), base.data(), n, hc, 5, 1e-6f, pre.data(),
                   post.data(), comb.data());
  plain_.hyper_fold(streams.data(), pre.data(), n, hc, d, x.data());
  plain_.hyper_expand(branch.data(), post.data(), comb.data(), streams.data(), n, hc, d,
                      out.data());

  float* d_mixes = upload(mixes);
  float* d_streams = upload(streams);
  float* d_branch = upload(branch);
  float* d_pre = upload(std::vector<float>(pre.size()));
  float* d_post = upload(std::vector<float>(post.size()));
  float* d_comb = upload(std::vector<float>(comb.size()));
  float* d_x = upload(std::vector<float>(x.size()));
  float* d_out = upload(std::vector<float>(out.size()));
  checked_.hyper_mix(d_mixes, scale.data(), base.data(), n, hc, 5, 1e-6f, d_pre, d_post, d_comb);
  checked_.hyper_fold(d_streams, d_pre, n, hc, d, d_x);
  checked_.hyper_expand(d_branch, d_post, d_comb, d_streams, n, hc, d, d_out);
  EXPECT_EQ(download(d_comb, comb.size()), comb) << "seed " << seed_;
  EXPECT_EQ(download(d_x, x.size()), x) << "seed " << seed_;
  EXPECT_EQ(download(d_out, out.size()), out) << "seed " << seed_;

  EXPECT_EQ(error_of([&] { checked_.hyper_fold(streams.data(), d_pre, n, hc, d, d_x); }),
            "checked backend: hyper_fold: streams is not backend memory");
  // comb holds n * hc * hc floats: one token more runs past it.
  EXPECT_EQ(error_of([&] {
              checked_.hyper_expand(d_branch, d_post, d_comb + hc * hc, d_streams, n, hc, d, d_out);
            }),
            "checked backend: hyper_expand: comb (192 bytes at offset 64) runs past its backend "
            "allocation of 192 bytes");
}

TEST_F(CheckedDeepSeek4OpsTest, KvCompressAndGatherKeepToBackendMemory) {
  const int64_t r = 4, dim = 8, width = 2 * dim, span = 2 * r, n = 9;
  const auto kv = random(size_t(n * width)), score = random(size_t(n * width));
  const auto ape = random(size_t(r * width));
  std::vector<float> state(size_t(span * 2 * width), 0.0f), keys(size_t(2 * dim));
  plain_.kv_compress(kv.data(), score.data(), ape.data(), state.data(), n, 0, r, dim, true,
                     keys.data());

  float* d_kv = upload(kv);
  float* d_score = upload(score);
  float* d_state = upload(std::vector<float>(state.size(), 0.0f));
  float* d_keys = upload(std::vector<float>(keys.size()));
  checked_.kv_compress(d_kv, d_score, ape.data(), d_state, n, 0, r, dim, true, d_keys);
  EXPECT_EQ(download(d_keys, keys.size()), keys) << "seed " << seed_;
  EXPECT_EQ(download(d_state, state.size()), state) << "seed " << seed_;
  EXPECT_EQ(error_of([&] {
              checked_.kv_compress(d_kv, d_score, ape.data(), state.data(), n, 0, r, dim, true,
                                   d_keys);
            }),
            "checked backend: kv_compress: state is not backend memory");

  // Cells of one F32 key head: cell c holds c, c, … ; cells 7 and 3 (7 + capacity wraps to 3).
  const int64_t capacity = 6;
  std::vector<float> cells(size_t(capacity * dim));
  for (size_t i = 0; i < cells.size(); ++i) cells[i] = float(int64_t(i) / dim);
  float* d_cells = upload(cells);
  const KvLayerView view{KvElement::kF32, d_cells, d_cells, capacity, 1, dim, 0};
  int32_t* d_chosen = upload(std::vector<int32_t>{1, 5, 9});
  float* d_out = upload(std::vector<float>(size_t(3 * dim)));
  checked_.gather_key_cells(view, d_chosen, 3, d_out);
  const auto got = download(d_out, size_t(3 * dim));
  for (int64_t i = 0; i < dim; ++i) {
    EXPECT_EQ(got[size_t(i)], 1.0f);
    EXPECT_EQ(got[size_t(dim + i)], 5.0f);
    EXPECT_EQ(got[size_t(2 * dim + i)], 3.0f);
  }
  const std::vector<int32_t> host_chosen = {1, 5, 9};
  EXPECT_EQ(error_of([&] { checked_.gather_key_cells(view, host_chosen.data(), 3, d_out); }),
            "checked backend: gather_key_cells: cells is not backend memory");
  EXPECT_EQ(error_of([&] { checked_.gather_key_cells(view, d_chosen, 3, d_out + dim); }),
            "checked backend: gather_key_cells: dst (96 bytes at offset 32) runs past its backend "
            "allocation of 96 bytes");
}

TEST_F(CheckedDeepSeek4OpsTest, ClampSwigluRefusesHostMemory) {
  float* gate = upload(std::vector<float>{-9.0f, 0.5f, 9.0f});
  float* up = upload(std::vector<float>{-9.0f, 0.5f, 9.0f});
  checked_.clamp_swiglu(gate, up, 3, 7.0f);
  EXPECT_EQ(download(gate, 3), (std::vector<float>{-9.0f, 0.5f, 7.0f}));
  EXPECT_EQ(download(up, 3), (std::vector<float>{-7.0f, 0.5f, 7.0f}));
  std::vector<float> host(3, 1.0f);
  EXPECT_EQ(error_of([&] { checked_.clamp_swiglu(gate, host.data(), 3, 7.0f); }),
            "checked backend: clamp_swiglu: up is not backend memory");
}

}  // namespace
}  // namespace sluice::test
