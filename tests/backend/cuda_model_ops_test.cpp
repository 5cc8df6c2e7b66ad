// What the model's forward needs of CudaBackend beyond the kernels: backend memory (allocate,
// upload, download, copy), the MoE row moves (gather_rows, scatter_rows, weighted_sum; their
// row and weight lists are host memory) and the weight mirror (weights given as HOST pointers
// are copied to the device once). Fresh random data each run (seed from the clock, in every
// failure message), device outputs poisoned with NaN (0xff bytes) before each launch. Every
// comparison here is bit for bit: the row moves are plain copies, weighted_sum does CpuBackend's
// float operations in its order (products rounded, then added by choice, no fusing), and a
// mirrored weight runs the very same kernel on the very same bytes as a device copy of it.
// Skips visibly without the CUDA backend or a device.
#include <gtest/gtest.h>

#ifdef SLUICE_HAVE_CUDA

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/quant_matmul.h"
#include "backend/cuda_test_fixture.h"
#include "backend/quant_test_data.h"
#include "quant/qtype.h"
#include "sluice/error.h"

namespace sluice::test {
namespace {

class CudaModelOpsTest : public CudaDeviceTest {
 protected:
  // `count` distinct row indices below `limit`, in random order.
  std::vector<int32_t> distinct_rows(int64_t count, int64_t limit) {
    std::vector<int32_t> all(static_cast<size_t>(limit));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng_);
    all.resize(size_t(count));
    return all;
  }

  // NaN everywhere (0xff bytes). (Hides CudaDeviceTest::poisoned, which makes DeviceBuffers.)
  std::unique_ptr<Allocation> poisoned(size_t bytes) { return poisoned_allocation(bytes); }
};

TEST_F(CudaModelOpsTest, AllocateIsZeroedAndCopiesRoundTrip) {
  EXPECT_FALSE(gpu_->host_memory());
  for (size_t bytes : {size_t(1), size_t(4096 + 12), size_t(3) << 20}) {
    Allocation a(*gpu_, bytes);
    ASSERT_NE(a.data(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 64, 0u);
    const auto zeros = fetch<uint8_t>(a, bytes);
    EXPECT_TRUE(std::all_of(zeros.begin(), zeros.end(), [](uint8_t b) { return b == 0; }))
        << bytes << " bytes not zeroed";
    std::vector<uint8_t> pattern(bytes);
    for (auto& b : pattern) b = uint8_t(rng_() | 1);  // never zero
    const std::vector<uint8_t> original = pattern;
    gpu_->upload(a.data(), pattern.data(), bytes);
    std::fill(pattern.begin(), pattern.end(), 0);  // reusable once upload returned
    EXPECT_EQ(fetch<uint8_t>(a, bytes), original) << "upload / download, " << where();
    Allocation b(*gpu_, bytes);
    gpu_->copy(b.data(), a.data(), bytes);
    EXPECT_EQ(fetch<uint8_t>(b, bytes), original) << "copy, " << where();
  }
  // 0 bytes: a unique pointer, released like any other; deallocate(nullptr) is a no-op.
  void* empty1 = gpu_->allocate(0);
  void* empty2 = gpu_->allocate(0);
  EXPECT_NE(empty1, nullptr);
  EXPECT_NE(empty1, empty2);
  gpu_->deallocate(empty1);
  gpu_->deallocate(empty2);
  gpu_->deallocate(nullptr);
}

// A pinned source is copied asynchronously by CUDA: upload must still leave it reusable.
TEST_F(CudaModelOpsTest, UploadFromPinnedMemoryLeavesItReusable) {
  const size_t n = size_t(4) << 20;  // 16 MiB: long enough that an unwaited copy would be caught
  cuda::PinnedBuffer pinned(n * sizeof(float));
  const auto values = uniform(n, -1.0f, 1.0f);
  std::memcpy(pinned.data(), values.data(), n * sizeof(float));
  Allocation a(*gpu_, n * sizeof(float));
  gpu_->upload(a.data(), pinned.data(), n * sizeof(float));
  std::memset(pinned.data(), 0xff, n * sizeof(float));
  expect_bits(fetch(a, n), values, "upload from pinned memory");
}

TEST_F(CudaModelOpsTest, OutOfMemoryThrowsAndTheBackendStaysUsable) {
  try {
    gpu_->allocate(size_t(1) << 50);  // 1 PiB
    FAIL() << "allocating 1 PiB succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of device memory allocating 1.00 PiB"),
              std::string::npos)
        << e.what();
  }
  const auto x = uniform(1000, -1.0f, 1.0f);
  auto dx = on_device(x);
  gpu_->scale(dx->as(), 2.0f, 1000);
  std::vector<float> expected = x;
  cpu_.scale(expected.data(), 2.0f, 1000);
  expect_bits(fetch(*dx, x.size()), expected, "scale after a failed allocation");
}

// Rows in random order; n 1 and 7 pass the list in the kernel's parameters, 130 through the
// device scratch; n_cols multiples of 4 take the float4 kernel, the others the scalar one.
TEST_F(CudaModelOpsTest, GatherAndScatterRowsAreExactCopies) {
  for (int64_t n : {1, 7, 130}) {
    for (int64_t n_cols : {2048, 7168, 1001, 2050, 3}) {
      const std::string what = "n " + std::to_string(n) + " n_cols " + std::to_string(n_cols);
      const int64_t table_rows = n + 9;
      const auto table = uniform(size_t(table_rows * n_cols), -5.0f, 5.0f);
      const auto rows = distinct_rows(n, table_rows);
      auto dtable = on_device(table);

      std::vector<float> expected(size_t(n * n_cols));
      cpu_.gather_rows(table.data(), rows.data(), n, n_cols, expected.data());
      auto dgathered = poisoned(expected.size() * sizeof(float));
      gpu_->gather_rows(dtable->as(), rows.data(), n, n_cols, dgathered->as());
      expect_bits(fetch(*dgathered, expected.size()), expected, "gather_rows " + what);

      // Scatter the gathered rows into a table of other values: listed rows replaced, the
      // rest untouched.
      const auto compact = uniform(size_t(n * n_cols), -5.0f, 5.0f);
      auto dcompact = on_device(compact);
      std::vector<float> scattered = uniform(table.size(), -5.0f, 5.0f);
      auto dscattered = on_device(scattered);
      cpu_.scatter_rows(compact.data(), rows.data(), n, n_cols, scattered.data());
      gpu_->scatter_rows(dcompact->as(), rows.data(), n, n_cols, dscattered->as());
      expect_bits(fetch(*dscattered, scattered.size()), scattered, "scatter_rows " + what);
    }
  }
}

// Several long lists queued before any of them runs, the scratch growing in between: each
// kernel must read its own list.
TEST_F(CudaModelOpsTest, QueuedGathersKeepTheirOwnRowLists) {
  const int64_t n_cols = 256, table_rows = 1000;
  const auto table = uniform(size_t(table_rows * n_cols), -5.0f, 5.0f);
  auto dtable = on_device(table);
  std::vector<std::vector<int32_t>> lists;
  std::vector<std::unique_ptr<Allocation>> outputs;
  for (int64_t n : {130, 700, 200, 999, 5}) {
    lists.push_back(distinct_rows(n, table_rows));
    outputs.push_back(poisoned(size_t(n * n_cols) * sizeof(float)));
    std::vector<int32_t> sent = lists.back();
    gpu_->gather_rows(dtable->as(), sent.data(), n, n_cols, outputs.back()->as());
    sent.assign(sent.size(), 0);  // the host list is free once the call returns
  }
  for (size_t i = 0; i < lists.size(); ++i) {
    const int64_t n = int64_t(lists[i].size());
    std::vector<float> expected(size_t(n * n_cols));
    cpu_.gather_rows(table.data(), lists[i].data(), n, n_cols, expected.data());
    expect_bits(fetch(*outputs[i], expected.size()), expected,
                "queued gather " + std::to_string(i));
  }
}

// weighted_sum: products rounded, summed in choice order, as CpuBackend: bit equal. Weights
// like a router's (0..1), in device memory.
TEST_F(CudaModelOpsTest, WeightedSumMatchesTheCpuBitForBit) {
  for (int64_t k : {1, 2, 8}) {
    for (int64_t n_tokens : {1, 3, 40}) {
      for (int64_t n : {2048, 1001, 6}) {
        const std::string what = "k " + std::to_string(k) + " tokens " + std::to_string(n_tokens) +
                                 " n " + std::to_string(n);
        const auto y = uniform(size_t(n_tokens * k * n), -8.0f, 8.0f);
        const auto weights = uniform(size_t(n_tokens * k), 0.0f, 1.0f);
        std::vector<float> expected(size_t(n_tokens * n));
        cpu_.weighted_sum(y.data(), weights.data(), n_tokens, k, n, expected.data());
        auto dy = on_device(y);
        auto dweights = on_device(weights);
        auto dout = poisoned(expected.size() * sizeof(float));
        gpu_->weighted_sum(dy->as(), dweights->as(), n_tokens, k, n, dout->as());
        expect_bits(fetch(*dout, expected.size()), expected, "weighted_sum " + what);
      }
    }
  }
}

TEST_F(CudaModelOpsTest, RowMovesRejectBadCallsWithAnError) {
  auto d = poisoned(64 * sizeof(float));
  const int32_t negative[] = {3, -1};
  EXPECT_THROW(gpu_->gather_rows(d->as(), negative, 2, 4, d->as()), Error);
  EXPECT_THROW(gpu_->scatter_rows(d->as(), negative, -1, 4, d->as()), Error);
  const float w[] = {0.5f};
  EXPECT_THROW(gpu_->weighted_sum(d->as(), w, 1, -2, 4, d->as()), Error);
  gpu_->synchronize();
}

// Weights given as host pointers give the same bits as the same call on device copies, each
// host weight is copied once, device pointers are never copied, and a later call that needs
// more bytes from the same pointer grows the copy.
TEST_F(CudaModelOpsTest, HostWeightsAreMirroredOnce) {
  // Every host weight lives until the end: a freed vector's address reused by the next one
  // would look like the same weight to the mirror (the contract forbids changing weights).
  uint64_t expected_mirror = 0;
  EXPECT_EQ(gpu_->mirrored_bytes(), 0u);
  const int64_t n = 1000, n_vec_rows = 3, rope_dim = 128, n_head = 8;
  const auto norm_weight = uniform(size_t(n), -2.0f, 2.0f);
  const auto bias = uniform(size_t(n), -1.0f, 1.0f);
  const auto factors = uniform(size_t(rope_dim / 2), 1.0f, 8.0f);
  const auto sinks = uniform(size_t(n_head), -2.0f, 4.0f);

  // matmul (Q4_K, decode and prefill) and get_rows (Q8_0, F16).
  const int64_t n_cols = 512, n_rows = 48;
  const auto q4k = random_weight_rows(QType::Q4_K, n_rows, n_cols, rng_);
  auto dq4k = on_device(q4k);
  for (int64_t n_tokens : {1, 12}) {
    const auto x = uniform(size_t(n_tokens * n_cols), -1.0f, 1.0f);
    auto dx = on_device(x);
    for (int64_t rows : {int64_t(16), n_rows}) {  // 16 rows first: the copy grows for 48
      const std::string what =
          "matmul Q4_K rows " + std::to_string(rows) + " tokens " + std::to_string(n_tokens);
      auto from_device = poisoned(size_t(n_tokens * rows) * sizeof(float));
      auto from_host = poisoned(size_t(n_tokens * rows) * sizeof(float));
      gpu_->matmul({QType::Q4_K, dq4k->data(), n_cols, rows}, dx->as(), from_device->as(),
                   n_tokens);
      gpu_->matmul({QType::Q4_K, q4k.data(), n_cols, rows}, dx->as(), from_host->as(), n_tokens);
      expect_bits(fetch(*from_host, size_t(n_tokens * rows)),
                  fetch(*from_device, size_t(n_tokens * rows)), what);
    }
  }
  expected_mirror += q4k.size();
  EXPECT_EQ(gpu_->mirrored_bytes(), expected_mirror) << "after matmul";

  const std::vector<int32_t> ids = {5, 0, 47, 5, 13};
  auto dids = on_device(ids);
  const std::vector<uint8_t> tables[] = {random_weight_rows(QType::Q8_0, n_rows, n_cols, rng_),
                                         random_weight_rows(QType::F16, n_rows, n_cols, rng_)};
  for (QType type : {QType::Q8_0, QType::F16}) {
    const auto& table = tables[type == QType::Q8_0 ? 0 : 1];
    auto dtable = on_device(table);
    auto from_device = poisoned(ids.size() * n_cols * sizeof(float));
    auto from_host = poisoned(ids.size() * n_cols * sizeof(float));
    gpu_->get_rows({type, dtable->data(), n_cols, n_rows}, dids->as<int32_t>(), int64_t(ids.size()),
                   from_device->as());
    for (int twice = 0; twice < 2; ++twice) {
      gpu_->get_rows({type, table.data(), n_cols, n_rows}, dids->as<int32_t>(), int64_t(ids.size()),
                     from_host->as());
    }
    expect_bits(fetch(*from_host, ids.size() * n_cols), fetch(*from_device, ids.size() * n_cols),
                std::string("get_rows ") + std::string(qtype_name(type)));
    expected_mirror += table.size();
    EXPECT_EQ(gpu_->mirrored_bytes(), expected_mirror) << "after get_rows, " << qtype_name(type);
  }

  // rms_norm's weight and add_bias's bias.
  const auto x = uniform(size_t(n * n_vec_rows), -3.0f, 3.0f);
  auto dx = on_device(x);
  auto dnorm = on_device(norm_weight);
  auto dbias = on_device(bias);
  {
    auto from_device = poisoned(x.size() * sizeof(float));
    auto from_host = poisoned(x.size() * sizeof(float));
    gpu_->rms_norm(dx->as(), dnorm->as(), from_device->as(), n_vec_rows, n, 1e-6f);
    gpu_->rms_norm(dx->as(), norm_weight.data(), from_host->as(), n_vec_rows, n, 1e-6f);
    gpu_->rms_norm(dx->as(), norm_weight.data(), from_host->as(), n_vec_rows, n, 1e-6f);
    expect_bits(fetch(*from_host, x.size()), fetch(*from_device, x.size()), "rms_norm");
    expected_mirror += norm_weight.size() * sizeof(float);
    EXPECT_EQ(gpu_->mirrored_bytes(), expected_mirror) << "after rms_norm";
  }
  {
    auto with_device = on_device(x);
    auto with_host = on_device(x);
    gpu_->add_bias(with_device->as(), dbias->as(), n_vec_rows, n);
    gpu_->add_bias(with_host->as(), bias.data(), n_vec_rows, n);
    expect_bits(fetch(*with_host, x.size()), fetch(*with_device, x.size()), "add_bias");
    expected_mirror += bias.size() * sizeof(float);
    EXPECT_EQ(gpu_->mirrored_bytes(), expected_mirror) << "after add_bias";
  }

  // rope's freq_factors.
  {
    const int64_t n_tokens = 5, head_dim = rope_dim;
    const auto q = uniform(size_t(n_tokens * n_head * head_dim), -4.0f, 4.0f);
    auto dfactors = on_device(factors);
    RopeConfig config;
    config.style = RopeStyle::kNeox;
    config.n_rot = head_dim;
    config.freq_base = 500000.0f;
    auto with_device = on_device(q);
    auto with_host = on_device(q);
    config.freq_factors = dfactors->as();
    gpu_->rope(with_device->as(), n_tokens, n_head, head_dim, 1234, config);
    config.freq_factors = factors.data();
    gpu_->rope(with_host->as(), n_tokens, n_head, head_dim, 1234, config);
    expect_bits(fetch(*with_host, q.size()), fetch(*with_device, q.size()), "rope freq_factors");
    expected_mirror += factors.size() * sizeof(float);
    EXPECT_EQ(gpu_->mirrored_bytes(), expected_mirror) << "after rope";
  }

  // attention's sinks: decode (split-K kernel) and a prefill chunk (tensor-core kernel).
  {
    const int64_t n_head_kv = 2, dim = 64, capacity = 256, pos0 = 200;
    auto dsinks = on_device(sinks);
    Allocation k_cells(*gpu_, size_t(capacity * n_head_kv * dim) * 2);
    Allocation v_cells(*gpu_, size_t(capacity * n_head_kv * dim) * 2);
    KvLayerView kv{KvElement::kF16, k_cells.data(), v_cells.data(), capacity, n_head_kv, dim, dim};
    const int64_t stored = pos0 + 16;
    const auto k = uniform(size_t(stored * n_head_kv * dim), -1.0f, 1.0f);
    const auto v = uniform(size_t(stored * n_head_kv * dim), -1.0f, 1.0f);
    auto dk = on_device(k);
    auto dv = on_device(v);
    gpu_->kv_store(kv, dk->as(), dv->as(), stored, 0);
    for (int64_t n_tokens : {1, 16}) {
      const auto q = uniform(size_t(n_tokens * n_head * dim), -1.0f, 1.0f);
      auto dq = on_device(q);
      const size_t out_n = size_t(n_tokens * n_head * dim);
      auto from_device = poisoned(out_n * sizeof(float));
      auto from_host = poisoned(out_n * sizeof(float));
      AttentionCall call;
      call.q = dq->as();
      call.n_tokens = n_tokens;
      call.n_head = n_head;
      call.pos0 = stored - n_tokens;
      call.scale = 0.125f;
      call.kv = kv;
      call.out = from_device->as();
      call.sinks = dsinks->as();
      gpu_->attention(call);
      call.out = from_host->as();
      call.sinks = sinks.data();
      gpu_->attention(call);
      expect_bits(fetch(*from_host, out_n), fetch(*from_device, out_n),
                  "attention sinks, tokens " + std::to_string(n_tokens));
    }
    expected_mirror += sinks.size() * sizeof(float);
    EXPECT_EQ(gpu_->mirrored_bytes(), expected_mirror) << "after attention";
  }
}

// One activation conversion for weights that read the same input equals one matmul each, bit
// for bit: Q4_K, Q5_K and Q6_K share Q8_K activations; with Q8_0 among them (another format),
// or past 8 tokens, the backend falls back to one matmul each, which must give the same bits.
TEST_F(CudaModelOpsTest, SharedInputMatmulEqualsOneMatmulEach) {
  const int64_t n_cols = 1024;
  const std::vector<std::pair<QType, int64_t>> weights = {
      {QType::Q4_K, 96}, {QType::Q5_K, 40}, {QType::Q6_K, 72}, {QType::Q8_0, 24}};
  std::vector<std::vector<uint8_t>> data;
  for (const auto& [type, rows] : weights)
    data.push_back(random_weight_rows(type, rows, n_cols, rng_));
  for (int64_t n_tokens : {1, 3, 8, 9}) {
    const auto x = uniform(size_t(n_tokens * n_cols), -3.0f, 3.0f);
    auto dx = on_device(x);
    for (size_t n_weights : {size_t(3), size_t(4)}) {
      std::vector<MatrixView> ws;
      std::vector<std::unique_ptr<Allocation>> shared, alone;
      std::vector<float*> ys;
      for (size_t i = 0; i < n_weights; ++i) {
        const auto& [type, rows] = weights[i];
        ws.push_back({type, data[i].data(), n_cols, rows});
        shared.push_back(poisoned(size_t(n_tokens * rows) * sizeof(float)));
        alone.push_back(poisoned(size_t(n_tokens * rows) * sizeof(float)));
        ys.push_back(shared.back()->as());
      }
      gpu_->matmul_shared_input(ws.data(), ys.data(), n_weights, dx->as(), n_tokens);
      for (size_t i = 0; i < n_weights; ++i)
        gpu_->matmul(ws[i], dx->as(), alone[i]->as(), n_tokens);
      for (size_t i = 0; i < n_weights; ++i) {
        const size_t n = size_t(n_tokens * ws[i].n_rows);
        expect_bits(fetch(*shared[i], n), fetch(*alone[i], n),
                    std::string(qtype_name(ws[i].type)) + " of " + std::to_string(n_weights) +
                        ", tokens " + std::to_string(n_tokens));
      }
    }
  }
}

// Matrices of one type share one product launch (the int8 kernel walks each matrix's blocks in
// turn): every output is still matmul's, bit for bit, for the layer shapes of q/k/v (576/192/
// 192) and gate/up, row counts that leave a partly filled block before the next matrix, five
// matrices (two launches of the 4-matrix kernel), and types mixed within one activation format
// (one launch per type, matrices of a type not adjacent).
TEST_F(CudaModelOpsTest, SharedInputOneLaunchPerTypeEqualsOneMatmulEach) {
  const int64_t n_cols = 768;  // whole blocks of 256 and of 32
  using Case = std::vector<std::pair<QType, int64_t>>;
  std::vector<Case> cases;
  for (QType type : {QType::Q4_0, QType::Q4_1, QType::Q8_0, QType::Q4_K, QType::Q5_K, QType::Q6_K,
                     QType::IQ4_XS}) {
    cases.push_back({{type, 576}, {type, 192}, {type, 192}});
    cases.push_back({{type, 1536}, {type, 1536}});
    cases.push_back({{type, 577}, {type, 190}, {type, 37}, {type, 1}, {type, 64}});
  }
  cases.push_back({{QType::Q4_K, 576},
                   {QType::Q6_K, 190},
                   {QType::Q4_K, 192},
                   {QType::Q6_K, 9},
                   {QType::IQ4_XS, 64}});
  cases.push_back({{QType::Q4_0, 100}, {QType::Q8_0, 61}, {QType::Q4_0, 3}});
  for (const Case& c : cases) {
    std::vector<std::vector<uint8_t>> data;
    for (const auto& [type, rows] : c) data.push_back(random_weight_rows(type, rows, n_cols, rng_));
    std::vector<MatrixView> ws;
    for (size_t i = 0; i < c.size(); ++i)
      ws.push_back({c[i].first, data[i].data(), n_cols, c[i].second});
    for (int64_t n_tokens : {1, 2}) {
      auto dx = on_device(uniform(size_t(n_tokens * n_cols), -3.0f, 3.0f));
      std::vector<std::unique_ptr<Allocation>> shared, alone;
      std::vector<float*> ys;
      for (const MatrixView& w : ws) {
        shared.push_back(poisoned(size_t(n_tokens * w.n_rows) * sizeof(float)));
        alone.push_back(poisoned(size_t(n_tokens * w.n_rows) * sizeof(float)));
        ys.push_back(shared.back()->as());
      }
      gpu_->matmul_shared_input(ws.data(), ys.data(), ws.size(), dx->as(), n_tokens);
      for (size_t i = 0; i < ws.size(); ++i)
        gpu_->matmul(ws[i], dx->as(), alone[i]->as(), n_tokens);
      for (size_t i = 0; i < ws.size(); ++i) {
        const size_t n = size_t(n_tokens * ws[i].n_rows);
        expect_bits(fetch(*shared[i], n), fetch(*alone[i], n),
                    std::string(qtype_name(ws[i].type)) + " matrix " + std::to_string(i) + " of " +
                        std::to_string(ws.size()) + ", tokens " + std::to_string(n_tokens));
      }
    }
  }
}

// The one-launch product refuses what matmul_quantized refuses, for any matrix of the list,
// before any device work.
TEST(CudaSharedInputProducts, RefusesBadInput) {
  std::string error;
  alignas(16) static float dummy[64];
  const void* ws[2] = {dummy, dummy};
  float* ys[2] = {dummy, dummy};
  int64_t rows[2] = {4, 4};
  EXPECT_FALSE(
      cuda::matmul_quantized_many(QType::F16, ws, rows, 2, 256, dummy, ys, 1, nullptr, &error));
  EXPECT_NE(error.find("no quantized decode"), std::string::npos) << error;
  rows[1] = 0;
  EXPECT_FALSE(
      cuda::matmul_quantized_many(QType::Q4_K, ws, rows, 2, 256, dummy, ys, 1, nullptr, &error));
  EXPECT_NE(error.find("bad shape"), std::string::npos) << error;
  rows[1] = 4;
  ys[1] = reinterpret_cast<float*>(reinterpret_cast<char*>(dummy) + 1);
  EXPECT_FALSE(
      cuda::matmul_quantized_many(QType::Q4_K, ws, rows, 2, 256, dummy, ys, 1, nullptr, &error));
  EXPECT_NE(error.find("aligned"), std::string::npos) << error;
  ys[1] = dummy;
  ws[1] = reinterpret_cast<const char*>(dummy) + 2;
  EXPECT_FALSE(
      cuda::matmul_quantized_many(QType::Q4_K, ws, rows, 2, 256, dummy, ys, 1, nullptr, &error));
  EXPECT_NE(error.find("aligned"), std::string::npos) << error;
  ws[1] = dummy;
  EXPECT_FALSE(
      cuda::matmul_quantized_many(QType::Q4_K, ws, rows, 2, 256, dummy, ys, 9, nullptr, &error));
  EXPECT_NE(error.find("tokens"), std::string::npos) << error;
}

// A recorded step (a CUDA graph) gives what the same ops give run one by one, its upload takes
// the host bytes at record time, its download lands after the replay, and a weight met for the
// first time while recording is refused (the step is then run unrecorded by the caller).
TEST_F(CudaModelOpsTest, RecordedStepEqualsThePlainOne) {
  const int64_t n_cols = 512, n_rows = 64;
  const auto w = random_weight_rows(QType::Q4_K, n_rows, n_cols, rng_);
  const auto norm = uniform(size_t(n_cols), 0.5f, 1.5f);
  auto dx = std::make_unique<Allocation>(*gpu_, size_t(n_cols) * sizeof(float));
  auto dn = std::make_unique<Allocation>(*gpu_, size_t(n_cols) * sizeof(float));
  auto dy = std::make_unique<Allocation>(*gpu_, size_t(n_rows) * sizeof(float));
  const auto step = [&](const std::vector<float>& x, std::vector<float>& y) {
    gpu_->upload(dx->data(), x.data(), x.size() * sizeof(float));
    gpu_->rms_norm(dx->as(), norm.data(), dn->as(), 1, n_cols, 1e-5f);
    gpu_->matmul({QType::Q4_K, w.data(), n_cols, n_rows}, dn->as(), dy->as(), 1);
    gpu_->download(y.data(), dy->data(), y.size() * sizeof(float));
  };
  std::vector<float> plain(static_cast<size_t>(n_rows));
  std::vector<float> recorded(static_cast<size_t>(n_rows), -1.0f);
  auto x = uniform(size_t(n_cols), -2.0f, 2.0f);
  step(x, plain);  // meets the weights: mirrored outside any recording
  for (int i = 0; i < 3; ++i) {
    x = uniform(size_t(n_cols), -2.0f, 2.0f);
    step(x, plain);
    ASSERT_TRUE(gpu_->begin_recorded_step());
    auto staged = x;  // the upload must have taken these bytes at record time
    step(staged, recorded);
    std::fill(staged.begin(), staged.end(), 0.0f);
    gpu_->end_recorded_step();
    expect_bits(recorded, plain, "recorded step " + std::to_string(i));
  }
  EXPECT_EQ(gpu_->recorded_steps(), 3u);
  const auto unseen = uniform(size_t(n_cols), 0.5f, 1.5f);
  ASSERT_TRUE(gpu_->begin_recorded_step());
  EXPECT_THROW(gpu_->rms_norm(dx->as(), unseen.data(), dn->as(), 1, n_cols, 1e-5f), Error);
  gpu_->abort_recorded_step();
  gpu_->rms_norm(dx->as(), unseen.data(), dn->as(), 1, n_cols, 1e-5f);  // usable again
  gpu_->synchronize();
}

}  // namespace
}  // namespace sluice::test

#else

TEST(CudaModelOpsTest, Skipped) {
  GTEST_SKIP() << "CUDA backend not built (no nvcc at configure time)";
}

#endif
