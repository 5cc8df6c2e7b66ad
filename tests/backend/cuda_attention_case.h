// What the device tests of attention share: a case (heads, dims, chunk, position, ring, window,
// softcap, sinks, cell type) run through both CpuBackend and CudaBackend over the same history,
// leaving each side's output and the CPU's cells for the test's own bounds (and the GPU's call
// repeated: the same bits each time)
// (cuda_backend_test.cpp: against a float64 softmax and the CPU; cuda_cpu_rounding_test.cpp:
// bit for bit against the CPU).
#pragma once

#ifdef SLUICE_HAVE_CUDA

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cuda_test_fixture.h"

namespace sluice::test {

struct AttentionCase {
  const char* name;
  KvElement type;
  int64_t n_head, n_head_kv, dk, dv;
  int64_t n_tokens, pos0, capacity, window;
  float softcap;
  bool sinks;
};

struct AttentionRun {
  std::vector<uint8_t> cpu_k, cpu_v;    // the CPU's cells, history and chunk stored
  std::vector<float> q, sinks;          // [n_tokens, n_head, dk], [n_head]
  float scale = 0.0f;                   // 1 / sqrt(dk)
  std::vector<float> cpu_out, gpu_out;  // [n_tokens, n_head, dv]
};

class CudaAttentionFixture : public CudaDeviceTest {
 protected:
  // Both sides store the same history with kv_store (chunks no longer than the ring or 512
  // cells, so they wrap it when the capacity is short), the cells checked byte for byte, then
  // attend the last chunk with the same queries (spread so that softmaxes are far from uniform)
  // and sinks. Call through ASSERT_NO_FATAL_FAILURE.
  void attend_both(const AttentionCase& c, AttentionRun& r) {
    const size_t elem = c.type == KvElement::kF16 ? 2 : 4;
    const int64_t k_row = c.n_head_kv * c.dk, v_row = c.n_head_kv * c.dv;
    r.cpu_k.assign(size_t(c.capacity * k_row) * elem, 0xff);
    r.cpu_v.assign(size_t(c.capacity * v_row) * elem, 0xff);
    auto gpu_k = poisoned(r.cpu_k.size());
    auto gpu_v = poisoned(r.cpu_v.size());
    KvLayerView cpu_view{c.type, r.cpu_k.data(), r.cpu_v.data(), c.capacity, c.n_head_kv, c.dk,
                         c.dv};
    KvLayerView gpu_view = cpu_view;
    gpu_view.k = gpu_k.data();
    gpu_view.v = gpu_v.data();
    const int64_t end = c.pos0 + c.n_tokens;
    for (int64_t p = std::max<int64_t>(0, c.pos0 - c.capacity); p < end;) {
      const int64_t n =
          p < c.pos0 ? std::min(c.pos0 - p, std::min<int64_t>(c.capacity, 512)) : c.n_tokens;
      const auto k = uniform(size_t(n * k_row), -1.0f, 1.0f);
      const auto v = uniform(size_t(n * v_row), -1.0f, 1.0f);
      cpu_.kv_store(cpu_view, k.data(), v.data(), n, p);
      auto dk_in = upload(k);
      auto dv_in = upload(v);
      gpu_->kv_store(gpu_view, dk_in.as<float>(), dv_in.as<float>(), n, p);
      gpu_->synchronize();
      p += n;
    }
    ASSERT_EQ(download<uint8_t>(gpu_k, r.cpu_k.size()), r.cpu_k) << "cells differ after kv_store";
    ASSERT_EQ(download<uint8_t>(gpu_v, r.cpu_v.size()), r.cpu_v) << "cells differ after kv_store";

    const float q_range = 24.0f / std::sqrt(float(c.dk));
    r.q = uniform(size_t(c.n_tokens * c.n_head * c.dk), -q_range, q_range);
    r.sinks = uniform(size_t(c.n_head), -2.0f, 4.0f);
    r.scale = 1.0f / std::sqrt(float(c.dk));
    AttentionCall call;
    call.q = r.q.data();
    call.n_tokens = c.n_tokens;
    call.n_head = c.n_head;
    call.pos0 = c.pos0;
    call.window = c.window;
    call.scale = r.scale;
    call.softcap = c.softcap;
    call.sinks = c.sinks ? r.sinks.data() : nullptr;
    call.kv = cpu_view;
    const size_t out_n = size_t(c.n_tokens * c.n_head * c.dv);
    r.cpu_out.assign(out_n, 0.0f);
    call.out = r.cpu_out.data();
    cpu_.attention(call);

    auto dq = upload(r.q);
    auto dsinks = upload(r.sinks);
    auto dout = poisoned(out_n * sizeof(float));
    call.q = dq.as<float>();
    call.out = dout.as<float>();
    call.sinks = c.sinks ? dsinks.as<float>() : nullptr;
    call.kv = gpu_view;
    gpu_->attention(call);
    r.gpu_out = download<float>(dout, out_n);
    // Twice more into freshly poisoned outputs: the same bits every call (no state a launch
    // leaves behind, such as split scratch, may change the next one's result).
    for (int again = 0; again < 2; ++again) {
      auto dout_again = poisoned(out_n * sizeof(float));
      call.out = dout_again.as<float>();
      gpu_->attention(call);
      const std::vector<float> repeated = download<float>(dout_again, out_n);
      ASSERT_EQ(std::memcmp(repeated.data(), r.gpu_out.data(), out_n * sizeof(float)), 0)
          << c.name << ": call " << again + 2 << " differs from the first (" << where() << ")";
    }
  }
};

}  // namespace sluice::test

#endif  // SLUICE_HAVE_CUDA
