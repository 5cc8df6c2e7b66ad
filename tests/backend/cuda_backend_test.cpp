// CudaBackend's non-matmul ops against CpuBackend (the reference) on fresh random data each run:
// inputs uploaded, outputs poisoned with NaN (0xff bytes) before each launch, results downloaded
// and compared with a tolerance stated per op. Attention is also compared with a float64
// softmax over the very cells the CPU stored, which bounds the GPU's own error tightly while
// the CPU-vs-GPU bound covers the CPU's cheaper arithmetic (half accumulators). Skips visibly
// without the CUDA backend or a device. The seed (from the clock) is in every failure message.
#include <gtest/gtest.h>

#ifdef SLUICE_HAVE_CUDA

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda_attention_case.h"
#include "backend/cuda_test_fixture.h"
#include "core/half.h"
#include "sluice/error.h"

namespace sluice::test {
namespace {

using cuda::DeviceBuffer;

// The shared device-test base (cuda_test_fixture.h).
using CudaBackendTest = CudaDeviceTest;

// rms_norm: squares summed in double on both sides, only in another order, so the float mean
// matches except on a double-rounding tie: at most 1 ulp.
TEST_F(CudaBackendTest, RmsNorm) {
  for (int64_t n : {1, 64, 4099}) {
    const int64_t rows = 7;
    const auto x = uniform(size_t(rows * n), -3.0f, 3.0f);
    const auto w = uniform(size_t(n), -2.0f, 2.0f);
    for (bool weighted : {true, false}) {
      std::vector<float> expected(x.size());
      cpu_.rms_norm(x.data(), weighted ? w.data() : nullptr, expected.data(), rows, n, 1e-6f);
      auto dx = upload(x);
      auto dw = upload(w);
      auto dy = poisoned(x.size() * sizeof(float));
      gpu_->rms_norm(dx.as<float>(), weighted ? dw.as<float>() : nullptr, dy.as<float>(), rows, n,
                     1e-6f);
      expect_ulps(download<float>(dy, x.size()), expected, 1, "rms_norm n=" + std::to_string(n));
      gpu_->rms_norm(dx.as<float>(), weighted ? dw.as<float>() : nullptr, dx.as<float>(), rows, n,
                     1e-6f);  // in place
      expect_ulps(download<float>(dx, x.size()), expected, 1, "rms_norm in place");
    }
  }
}

// add_rms_norm (the residual add fused with the next norm): bit-equal to the backend's own add
// then rms_norm (the same float operations, the same block reduction), x keeping the sums; the
// sums bit-equal to the CPU's (one rounded addition each) and the norm within rms_norm's 1 ulp
// of the CPU's add then rms_norm. Also with the norm written over the branch, and x as the
// norm's output refused.
TEST_F(CudaBackendTest, AddRmsNormEqualsAddThenRmsNorm) {
  for (int64_t n : {1, 64, 576, 4099}) {
    for (int64_t rows : {1, 7}) {
      const size_t count = size_t(rows * n);
      const auto x = uniform(count, -3.0f, 3.0f);
      const auto branch = uniform(count, -3.0f, 3.0f);
      const auto w = uniform(size_t(n), -2.0f, 2.0f);
      for (bool weighted : {true, false}) {
        const std::string what = "n=" + std::to_string(n) + " rows=" + std::to_string(rows) +
                                 (weighted ? " weighted" : "");
        std::vector<float> cpu_x = x, cpu_xn(count);
        cpu_.add_rms_norm(cpu_x.data(), branch.data(), weighted ? w.data() : nullptr, cpu_xn.data(),
                          rows, n, 1e-6f);
        auto dw = upload(w);
        const float* weight = weighted ? dw.as<float>() : nullptr;
        auto db = upload(branch);
        auto dx_split = upload(x);
        auto dxn_split = poisoned(count * sizeof(float));
        gpu_->add(dx_split.as<float>(), db.as<float>(), int64_t(count));
        gpu_->rms_norm(dx_split.as<float>(), weight, dxn_split.as<float>(), rows, n, 1e-6f);
        const auto split_x = download<float>(dx_split, count);
        const auto split_xn = download<float>(dxn_split, count);
        auto dx = upload(x);
        auto dxn = poisoned(count * sizeof(float));
        gpu_->add_rms_norm(dx.as<float>(), db.as<float>(), weight, dxn.as<float>(), rows, n, 1e-6f);
        expect_ulps(download<float>(dx, count), split_x, 0, "fused x, " + what);
        expect_ulps(download<float>(dxn, count), split_xn, 0, "fused xn, " + what);
        expect_ulps(split_x, cpu_x, 0, "x against the CPU, " + what);
        expect_ulps(split_xn, cpu_xn, 1, "xn against the CPU, " + what);
        auto dx_alias = upload(x);
        auto db_alias = upload(branch);  // the norm lands over the branch it read
        gpu_->add_rms_norm(dx_alias.as<float>(), db_alias.as<float>(), weight, db_alias.as<float>(),
                           rows, n, 1e-6f);
        expect_ulps(download<float>(dx_alias, count), split_x, 0, "x, xn over branch, " + what);
        expect_ulps(download<float>(db_alias, count), split_xn, 0, "xn over branch, " + what);
      }
    }
  }
  auto dx = upload(uniform(64, -1.0f, 1.0f));
  EXPECT_THROW(
      gpu_->add_rms_norm(dx.as<float>(), dx.as<float>(), nullptr, dx.as<float>(), 1, 64, 1e-6f),
      Error);
}

// rope: the same float steps; cos/sin are correctly rounded here and within ~0.56 ulp in glibc,
// so an angle may differ by 1 ulp: |difference| <= 2^-22 (|x0| + |x1|) of the rotated pair.
TEST_F(CudaBackendTest, RopeVariants) {
  struct Case {
    RopeStyle style;
    int64_t head_dim, n_rot;
    float freq_scale;
    bool factors;
    float ext_factor, attn_factor;
    int64_t pos0;
  };
  const Case cases[] = {
      {RopeStyle::kNormal, 128, 128, 1.0f, false, 0.0f, 1.0f, 0},
      {RopeStyle::kNeox, 128, 128, 1.0f, false, 0.0f, 1.0f, 17},
      {RopeStyle::kNeox, 128, 64, 1.0f, false, 0.0f, 1.0f, 3000},    // partial rotation
      {RopeStyle::kNormal, 64, 64, 0.25f, true, 0.0f, 1.0f, 70000},  // linear scale, factors
      {RopeStyle::kNeox, 256, 256, 0.25f, false, 1.0f, 1.0f, 9000},  // YaRN
      {RopeStyle::kNeox, 192, 64, 0.025f, false, 1.0f, 0.7f, 150000},
  };
  for (const Case& c : cases) {
    const int64_t n_tokens = 9, n_head = 5;
    const auto x = uniform(size_t(n_tokens * n_head * c.head_dim), -4.0f, 4.0f);
    const auto factors = uniform(size_t(c.n_rot / 2), 1.0f, 8.0f);
    auto dfactors = upload(factors);
    RopeConfig config;
    config.style = c.style;
    config.n_rot = c.n_rot;
    config.freq_base = 500000.0f;
    config.freq_scale = c.freq_scale;
    config.ext_factor = c.ext_factor;
    config.attn_factor = c.attn_factor;
    config.n_ctx_orig = 4096;
    config.freq_factors = c.factors ? factors.data() : nullptr;
    std::vector<float> expected = x;
    cpu_.rope(expected.data(), n_tokens, n_head, c.head_dim, c.pos0, config);
    config.freq_factors = c.factors ? dfactors.as<float>() : nullptr;
    auto dx = upload(x);
    gpu_->rope(dx.as<float>(), n_tokens, n_head, c.head_dim, c.pos0, config);
    const auto got = download<float>(dx, x.size());
    const int64_t half = c.n_rot / 2;
    for (int64_t row = 0; row < n_tokens * n_head; ++row) {
      for (int64_t i = 0; i < c.head_dim; ++i) {
        // The pair partner of i (dimensions past n_rot pass through and must be equal).
        int64_t a = i, b = i;
        if (i < c.n_rot) {
          a = c.style == RopeStyle::kNormal ? i & ~int64_t(1) : i % half;
          b = c.style == RopeStyle::kNormal ? a + 1 : a + half;
        }
        const size_t at = size_t(row * c.head_dim + i);
        const float bound = i < c.n_rot ? 0x1p-22f * (std::fabs(x[size_t(row * c.head_dim + a)]) +
                                                      std::fabs(x[size_t(row * c.head_dim + b)]))
                                        : 0.0f;
        ASSERT_LE(std::fabs(got[at] - expected[at]), bound)
            << "rope n_rot " << c.n_rot << " pos0 " << c.pos0 << " element " << at << " ("
            << where() << ")";
      }
    }
  }
}

// kv_store: F32 cells copied, F16 cells rounded to nearest even as core/half.h does: bit equal,
// including the ring's wrap (cell = position % capacity) and untouched cells.
TEST_F(CudaBackendTest, KvStoreWrapsTheRing) {
  for (KvElement type : {KvElement::kF16, KvElement::kF32}) {
    const int64_t capacity = 16, n_head_kv = 3, dk = 40, dv = 24, n_tokens = 5, pos0 = 14;
    const size_t elem = type == KvElement::kF16 ? 2 : 4;
    const size_t k_bytes = size_t(capacity * n_head_kv * dk) * elem;
    const size_t v_bytes = size_t(capacity * n_head_kv * dv) * elem;
    const auto k = uniform(size_t(n_tokens * n_head_kv * dk), -3.0f, 3.0f);
    const auto v = uniform(size_t(n_tokens * n_head_kv * dv), -3.0f, 3.0f);
    std::vector<uint8_t> cpu_k(k_bytes, 0xff), cpu_v(v_bytes, 0xff);
    KvLayerView view{type, cpu_k.data(), cpu_v.data(), capacity, n_head_kv, dk, dv};
    cpu_.kv_store(view, k.data(), v.data(), n_tokens, pos0);
    auto dk_cells = poisoned(k_bytes);
    auto dv_cells = poisoned(v_bytes);
    auto dk_in = upload(k);
    auto dv_in = upload(v);
    view.k = dk_cells.data();
    view.v = dv_cells.data();
    gpu_->kv_store(view, dk_in.as<float>(), dv_in.as<float>(), n_tokens, pos0);
    EXPECT_EQ(download<uint8_t>(dk_cells, k_bytes), cpu_k) << where();
    EXPECT_EQ(download<uint8_t>(dv_cells, v_bytes), cpu_v) << where();
  }
}

// glu. kGeluTanhF16 reads the CPU's own table: bit equal. kSilu: the polynomial exp is bit
// equal, the row tails (n_cols % 8) use libm's expf (glibc within ~0.5 ulp of the correctly
// rounded value used here), as do kSwigluOai; 2 ulp covers that ulp through 1 + e and the
// division. kGeluTanh: one tanhf ulp is magnified by 1 + tanh cancelling for x << 0, so the
// bound is absolute, 2^-21 |x u| (1 + tanh <= 2, times 0.5 x, times u, twice an ulp of tanh).
TEST_F(CudaBackendTest, GluActivations) {
  const int64_t n_rows = 3, n_cols = 131;  // 131: a tail of 3 after 16 groups of 8
  for (GluActivation act : {GluActivation::kSilu, GluActivation::kGeluTanh,
                            GluActivation::kGeluTanhF16, GluActivation::kSwigluOai}) {
    const auto gate = uniform(size_t(n_rows * n_cols), -12.0f, 12.0f);
    const auto up = uniform(size_t(n_rows * n_cols), -9.0f, 9.0f);
    std::vector<float> expected = gate;
    cpu_.glu(act, expected.data(), up.data(), n_rows, n_cols);
    auto dg = upload(gate);
    auto du = upload(up);
    gpu_->glu(act, dg.as<float>(), du.as<float>(), n_rows, n_cols);
    const auto got = download<float>(dg, gate.size());
    const std::string what = "glu " + std::to_string(int(act));
    if (act == GluActivation::kGeluTanhF16) {
      expect_ulps(got, expected, 0, what);
    } else if (act == GluActivation::kGeluTanh) {
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_LE(std::fabs(got[i] - expected[i]), 0x1p-21f * std::fabs(gate[i] * up[i]) + 1e-30f)
            << what << " element " << i << " (" << where() << ")";
      }
    } else {
      expect_ulps(got, expected, 2, what);
    }
  }
}

// mul_sigmoid: libm's expf inside (see above): 2 ulp. add, add_bias, scale: one IEEE operation
// each: bit equal. softcap: libm's tanhf: 2 ulp.
TEST_F(CudaBackendTest, ElementwiseOps) {
  const int64_t n_rows = 5, n_cols = 1001, n = n_rows * n_cols;
  const auto x = uniform(size_t(n), -20.0f, 20.0f);
  const auto g = uniform(size_t(n), -20.0f, 20.0f);
  const auto bias = uniform(size_t(n_cols), -1.0f, 1.0f);
  {
    std::vector<float> expected = x;
    cpu_.mul_sigmoid(expected.data(), g.data(), n);
    auto dx = upload(x);
    auto dg = upload(g);
    gpu_->mul_sigmoid(dx.as<float>(), dg.as<float>(), n);
    expect_ulps(download<float>(dx, size_t(n)), expected, 2, "mul_sigmoid");
  }
  {
    std::vector<float> expected = x;
    cpu_.add(expected.data(), g.data(), n);
    auto dx = upload(x);
    auto dg = upload(g);
    gpu_->add(dx.as<float>(), dg.as<float>(), n);
    expect_ulps(download<float>(dx, size_t(n)), expected, 0, "add");
  }
  {
    std::vector<float> expected = x;
    cpu_.add_bias(expected.data(), bias.data(), n_rows, n_cols);
    auto dx = upload(x);
    auto db = upload(bias);
    gpu_->add_bias(dx.as<float>(), db.as<float>(), n_rows, n_cols);
    expect_ulps(download<float>(dx, size_t(n)), expected, 0, "add_bias");
  }
  {
    std::vector<float> expected = x;
    cpu_.scale(expected.data(), 0.0883883f, n);
    auto dx = upload(x);
    gpu_->scale(dx.as<float>(), 0.0883883f, n);
    expect_ulps(download<float>(dx, size_t(n)), expected, 0, "scale");
  }
  {
    std::vector<float> expected = x;
    cpu_.softcap(expected.data(), 15.0f, n);
    auto dx = upload(x);
    gpu_->softcap(dx.as<float>(), 15.0f, n);
    expect_ulps(download<float>(dx, size_t(n)), expected, 2, "softcap");
  }
}

// copy_strided_rows: a column block of rows (a head's rotary part) out and back, into a
// poisoned destination: plain copies, bit-equal, and the cells between the rows untouched.
TEST_F(CudaBackendTest, CopyStridedRows) {
  const int64_t n_rows = 37, src_stride = 96, dst_stride = 40, n_cols = 24;
  const auto x = uniform(size_t(n_rows * src_stride), -5.0f, 5.0f);
  std::vector<float> expected(size_t(n_rows * dst_stride), 7.0f);
  cpu_.copy_strided_rows(x.data() + 64, src_stride, expected.data() + 3, dst_stride, n_rows,
                         n_cols);
  auto dx = upload(x);
  auto dy = upload(std::vector<float>(size_t(n_rows * dst_stride), 7.0f));
  gpu_->copy_strided_rows(dx.as<float>() + 64, src_stride, dy.as<float>() + 3, dst_stride, n_rows,
                          n_cols);
  expect_ulps(download<float>(dy, expected.size()), expected, 0, "copy_strided_rows");
}

// upload_rows: an expert's parts, each in its own stack of host memory, into one slot. From
// pageable memory a copy per row; from a pinned range one 2D copy, on the main stream or the
// side one (joined): each bit-equal to the CPU backend's per-row copies, the slot's gaps kept.
TEST_F(CudaBackendTest, UploadRowsFromStacks) {
  constexpr size_t kRows = 3, kExperts = 5, kWidth = 1000, kSlotPitch = 1024;  // floats
  const auto host = uniform(kRows * kExperts * kWidth, -5.0f, 5.0f);
  const size_t expert = 3, stack_bytes = kExperts * kWidth * sizeof(float);
  std::vector<float> expected(kRows * kSlotPitch, 7.0f);
  cpu_.upload_rows(expected.data(), kSlotPitch * sizeof(float), host.data() + expert * kWidth,
                   stack_bytes, kWidth * sizeof(float), kRows, false);
  for (const bool pinned : {false, true}) {
    if (pinned) {
      ASSERT_TRUE(gpu_->pin_host_memory(host.data(), host.size() * sizeof(float)));
    }
    for (const bool ahead : {false, true}) {
      auto slot = on_device(std::vector<float>(expected.size(), 7.0f));
      gpu_->upload_rows(slot->data(), kSlotPitch * sizeof(float), host.data() + expert * kWidth,
                        stack_bytes, kWidth * sizeof(float), kRows, ahead);
      gpu_->join_ahead();
      expect_bits(fetch(*slot, expected.size()), expected,
                  std::string("upload_rows") + (pinned ? " pinned" : "") + (ahead ? " ahead" : ""));
    }
  }
  gpu_.reset();  // before `host`, which it page-locked, is freed
}

// softmax_rows: the polynomial exp bit equal, libm's expf on the tail (n % 8); the double sum
// in another order: float(1 / sum) equal but for a near-tie. 1 ulp, or 2 with a tail.
TEST_F(CudaBackendTest, SoftmaxRows) {
  for (int64_t n_cols : {8, 64, 128, 131, 256, 3}) {
    const int64_t n_rows = 33;
    const auto x = uniform(size_t(n_rows * n_cols), -8.0f, 8.0f);
    std::vector<float> expected = x;
    cpu_.softmax_rows(expected.data(), n_rows, n_cols);
    auto dx = upload(x);
    gpu_->softmax_rows(dx.as<float>(), n_rows, n_cols);
    expect_ulps(download<float>(dx, x.size()), expected, n_cols % 8 == 0 ? 1 : 2,
                "softmax_rows n=" + std::to_string(n_cols));
  }
}

// attention. Both sides store the same history with kv_store (chunks that wrap the ring when the
// capacity is short), then attend the last chunk. Errors are measured per output element
// relative to a(t, h, d) = sum_p softmax_p |v_p,d| (the output's own scale; a convex
// combination can lose no more than that):
//  - GPU vs a float64 softmax over the CPU's cells (float q, cells as stored): float32 online
//    softmax, exp and sums in float, split partials merged in float: 1e-5 a.
//  - GPU vs CPU: the CPU's F32 path is float32 too (1e-5 a more); its F16 decode path (chunks
//    under 64 tokens) rounds the query to half and keeps the value accumulator in half,
//    rounding it at every cell (2^-12 relative each): against this file's float64 reference
//    on these cases it measured 1.2e-3 .. 3.5e-3 a on the CPU alone, so 1e-2 a; its F16
//    tiled path (64+ tokens) is
//    float32 with the polynomial exp: 2e-5 a.
//  - The tensor-core prefill kernel (F16 cells, dk = dv in {64, 128, 256}, over 8 tokens) rounds
//    the query and the weights to f16: both bounds above grow by tensor_core_bound (in run),
//    and it is also checked within 2e-3 a of a float64 softmax of the f16-rounded query.
class CudaAttentionTest : public CudaAttentionFixture {
 protected:
  void run(const AttentionCase& c) {
    SCOPED_TRACE(std::string(c.name) + ", " + where());
    const int64_t group = c.n_head / c.n_head_kv;
    AttentionRun both;
    ASSERT_NO_FATAL_FAILURE(attend_both(c, both));
    const std::vector<uint8_t>&cpu_k = both.cpu_k, &cpu_v = both.cpu_v;
    const std::vector<float>&q = both.q, &sinks = both.sinks;
    const std::vector<float>&cpu_out = both.cpu_out, &gpu_out = both.gpu_out;

    const double cpu_tolerance = c.type == KvElement::kF32 ? 1e-5 : c.n_tokens >= 64 ? 2e-5 : 1e-2;
    const auto cell = [&](const std::vector<uint8_t>& cells, int64_t index) {
      if (c.type == KvElement::kF32) {
        float f;
        std::memcpy(&f, cells.data() + size_t(index) * 4, 4);
        return double(f);
      }
      uint16_t h;
      std::memcpy(&h, cells.data() + size_t(index) * 2, 2);
      return double(fp16_to_fp32(h));
    };
    // The tensor-core prefill kernel (cuda_attention_prefill.cu) rounds the query and the
    // softmax weights to f16: see tensor_core_bound below.
    const bool tensor_cores = c.type == KvElement::kF16 && c.dk == c.dv &&
                              (c.dk == 64 || c.dk == 128 || c.dk == 256) && c.n_tokens > 8;
    double worst_gpu = 0.0, worst_cpu = 0.0, worst_q16 = 0.0;
    std::vector<double> scores, acc(size_t(c.dv)), abs_acc(size_t(c.dv));
    std::vector<double> q_used(size_t(c.dk)), acc16(size_t(c.dv));
    // Float64 softmax of query q_used for (pos, kv_head) into out (Σ w v), abs_out (Σ w |v|),
    // returns Σ w (sink included).
    const auto reference = [&](int64_t pos, int64_t first, int64_t h, int64_t kv_head,
                               std::vector<double>& out, std::vector<double>* abs_out) {
      scores.clear();
      double max_score = c.sinks ? double(sinks[size_t(h)]) : -1e300;
      for (int64_t p = first; p <= pos; ++p) {
        const int64_t base = ((p % c.capacity) * c.n_head_kv + kv_head) * c.dk;
        double s = 0.0;
        for (int64_t d = 0; d < c.dk; ++d) s += q_used[size_t(d)] * cell(cpu_k, base + d);
        s *= double(both.scale);
        if (c.softcap > 0.0f) s = double(c.softcap) * std::tanh(s / double(c.softcap));
        scores.push_back(s);
        max_score = std::max(max_score, s);
      }
      double sum = c.sinks ? std::exp(double(sinks[size_t(h)]) - max_score) : 0.0;
      std::fill(out.begin(), out.end(), 0.0);
      if (abs_out != nullptr) std::fill(abs_out->begin(), abs_out->end(), 0.0);
      for (int64_t p = first; p <= pos; ++p) {
        const double w = std::exp(scores[size_t(p - first)] - max_score);
        sum += w;
        const int64_t base = ((p % c.capacity) * c.n_head_kv + kv_head) * c.dv;
        for (int64_t d = 0; d < c.dv; ++d) {
          const double v = cell(cpu_v, base + d);
          out[size_t(d)] += w * v;
          if (abs_out != nullptr) (*abs_out)[size_t(d)] += w * std::fabs(v);
        }
      }
      return sum;
    };
    for (int64_t t = 0; t < c.n_tokens; ++t) {
      const int64_t pos = c.pos0 + t;
      const int64_t first = c.window > 0 ? std::max<int64_t>(0, pos - c.window + 1) : 0;
      for (int64_t h = 0; h < c.n_head; ++h) {
        const int64_t kv_head = h / group;
        const float* qh = q.data() + (t * c.n_head + h) * c.dk;
        for (int64_t d = 0; d < c.dk; ++d) q_used[size_t(d)] = double(qh[d]);
        const double sum = reference(pos, first, h, kv_head, acc, &abs_acc);
        // Tensor cores: the query rounded to f16 (relative 2^-11, absolute 2^-25 below 2^-14)
        // moves each score by at most delta = scale (2^-11 Σ|q k| + 2^-25 Σ|k|) (softcap only
        // shrinks it), so each weight by a factor within e^±delta and, the softmax being
        // normalized, the output by at most (e^{2 delta} - 1) a. The weights rounded to f16
        // (2^-11; the sum uses them unrounded) and the float32 steps add under 2e-3 a: the
        // output is checked within 2e-3 a of a float64 softmax of the rounded query.
        double tensor_core_bound = 0.0, sum16 = 0.0;
        if (tensor_cores) {
          double delta = 0.0;
          for (int64_t p = first; p <= pos; ++p) {
            const int64_t base = ((p % c.capacity) * c.n_head_kv + kv_head) * c.dk;
            double qk = 0.0, kk = 0.0;
            for (int64_t d = 0; d < c.dk; ++d) {
              qk += std::fabs(double(qh[d]) * cell(cpu_k, base + d));
              kk += std::fabs(cell(cpu_k, base + d));
            }
            delta = std::max(delta, double(both.scale) * (0x1p-11 * qk + 0x1p-25 * kk));
          }
          tensor_core_bound = std::expm1(2.0 * delta) + 2e-3;
          for (int64_t d = 0; d < c.dk; ++d)
            q_used[size_t(d)] = double(fp16_to_fp32(fp32_to_fp16(qh[d])));
          sum16 = reference(pos, first, h, kv_head, acc16, nullptr);
        }
        for (int64_t d = 0; d < c.dv; ++d) {
          const size_t at = size_t((t * c.n_head + h) * c.dv + d);
          const double expected = acc[size_t(d)] / sum;
          const double a = abs_acc[size_t(d)] / sum + 1e-30;
          const double gpu_error = std::fabs(double(gpu_out[at]) - expected) / a;
          const double cpu_error = std::fabs(double(gpu_out[at]) - double(cpu_out[at])) / a;
          ASSERT_FALSE(std::isnan(gpu_out[at])) << "NaN at token " << t << " head " << h;
          worst_gpu = std::max(worst_gpu, gpu_error);
          worst_cpu = std::max(worst_cpu, cpu_error);
          if (tensor_cores) {
            const double q16_error = std::fabs(double(gpu_out[at]) - acc16[size_t(d)] / sum16) / a;
            worst_q16 = std::max(worst_q16, q16_error);
            ASSERT_LE(q16_error, 2e-3) << "vs float64 of the f16 query: token " << t << " head "
                                       << h << " dim " << d << " gpu " << gpu_out[at];
          }
          ASSERT_LE(gpu_error, 1e-5 + tensor_core_bound)
              << "vs float64: token " << t << " head " << h << " dim " << d << " gpu "
              << gpu_out[at] << " expected " << expected;
          ASSERT_LE(cpu_error, cpu_tolerance + 1e-5 + tensor_core_bound)
              << "vs CPU: token " << t << " head " << h << " dim " << d << " gpu " << gpu_out[at]
              << " cpu " << cpu_out[at];
        }
      }
    }
    if (tensor_cores)
      std::printf("  %-28s (tensor cores) |gpu-f64(q16)|/a %.2e\n", c.name, worst_q16);
    std::printf("  %-28s worst |gpu-f64|/a %.2e, |gpu-cpu|/a %.2e\n", c.name, worst_gpu, worst_cpu);
  }
};

TEST_F(CudaAttentionTest, DecodeGqaRatios) {
  //         name                    type             nh nkv  dk   dv  n  pos0 cap  win cap  sinks
  run({"mha 64 f32", KvElement::kF32, 8, 8, 64, 64, 1, 200, 512, 0, 0.0f, false});
  run({"gqa4 128 f16", KvElement::kF16, 16, 4, 128, 128, 1, 1000, 2048, 0, 0.0f, false});
  run({"gqa8 128 f16 sinks", KvElement::kF16, 32, 4, 128, 128, 5, 700, 1024, 0, 0.0f, true});
  run({"gqa8 256 f32 softcap", KvElement::kF32, 8, 1, 256, 256, 1, 900, 1024, 0, 2.0f, false});
  run({"gqa8 f16 4k cache", KvElement::kF16, 16, 2, 128, 128, 1, 4095, 4096, 0, 0.0f, false});
}

// The F16 decode kernel (cuda_attention_decode.cu): every head dim it takes, 4-row
// blocks, up to 8 tokens, and long caches split over a hundred or more blocks whose partials the
// combine kernel merges (with sinks, softcap and a window across the ring's wrap); and short
// contexts, whose split plan (for the span bucket's end) leaves most splits empty.
TEST_F(CudaAttentionTest, DecodeKernelSplitK) {
  run({"d256 gqa4 f16 short (gemma)", KvElement::kF16, 4, 1, 256, 256, 1, 40, 512, 0, 0.0f, false});
  run({"d128 gqa8 f16 short", KvElement::kF16, 32, 4, 128, 128, 1, 12, 4096, 0, 0.0f, true});
  run({"d32 gqa2 f16 3 tokens", KvElement::kF16, 4, 2, 32, 32, 3, 333, 512, 0, 0.0f, false});
  run({"d256 gqa4 f16 softcap", KvElement::kF16, 8, 2, 256, 256, 1, 3000, 4096, 0, 30.0f, true});
  run({"d64 gqa8 f16 16k sinks", KvElement::kF16, 16, 2, 64, 64, 1, 16383, 16384, 0, 0.0f, true});
  run({"d128 gqa4 f16 8 tokens", KvElement::kF16, 8, 2, 128, 128, 8, 9000, 12288, 0, 0.0f, false});
  run({"d64 mha f16 window 7", KvElement::kF16, 4, 4, 64, 64, 7, 9000, 4096, 4000, 0.0f, true});
}

TEST_F(CudaAttentionTest, PrefillChunks) {
  run({"gqa8 256 f16 softcap", KvElement::kF16, 8, 1, 256, 256, 64, 300, 512, 0, 2.0f, false});
  run({"gqa4 128 f16 300 tokens", KvElement::kF16, 8, 2, 128, 128, 300, 0, 512, 0, 0.0f, false});
  run({"mha 64 f32 300 tokens", KvElement::kF32, 4, 4, 64, 64, 300, 37, 512, 0, 0.0f, true});
  run({"gqa8 128 f16 sinks", KvElement::kF16, 16, 2, 128, 128, 64, 100, 256, 0, 0.0f, true});
}

// The tensor-core F16 prefill kernel (cuda_attention_prefill.cu): head dims 64/128/256, GQA
// 1/4/8, 9 to 1000 tokens (9: a short chunk over a long cache, split over blocks and merged),
// causal with pos0 > 0, sinks, softcap, a window over the ring. Bounds: see tensor_core_bound.
TEST_F(CudaAttentionTest, PrefillTensorCores) {
  //         name                    type             nh nkv  dk   dv  n    pos0  cap win cap  sinks
  run({"tc d128 gqa4 9 split", KvElement::kF16, 8, 2, 128, 128, 9, 3000, 4096, 0, 0.0f, true});
  run({"tc d64 mha 9 window softcap", KvElement::kF16, 8, 8, 64, 64, 9, 3000, 256, 100, 20.0f,
       false});
  run({"tc d64 mha 64 sinks", KvElement::kF16, 4, 4, 64, 64, 64, 100, 512, 0, 0.0f, true});
  run({"tc d256 gqa8 300 softcap", KvElement::kF16, 8, 1, 256, 256, 300, 37, 512, 0, 30.0f, false});
  run({"tc d64 gqa4 1000", KvElement::kF16, 4, 1, 64, 64, 1000, 24, 1024, 0, 0.0f, false});
  run({"tc d128 gqa8 300 window ring", KvElement::kF16, 16, 2, 128, 128, 300, 1000, 512, 200, 0.0f,
       true});
}

TEST_F(CudaAttentionTest, MlaHeadDims) {
  run({"mla 192/128 f32 decode", KvElement::kF32, 16, 16, 192, 128, 1, 400, 1024, 0, 0.0f, false});
  run({"mla 192/128 f16 5", KvElement::kF16, 16, 16, 192, 128, 5, 400, 1024, 0, 0.0f, false});
  run({"mla 192/128 f16 64", KvElement::kF16, 8, 8, 192, 128, 64, 200, 512, 0, 0.0f, false});
}

TEST_F(CudaAttentionTest, SlidingWindowOverWrappedRing) {
  run({"window f16 decode", KvElement::kF16, 8, 2, 128, 128, 1, 5000, 256, 128, 0.0f, false});
  run({"window f16 5 tokens", KvElement::kF16, 8, 2, 64, 64, 5, 1000, 256, 128, 0.0f, true});
  run({"window f32 64 tokens", KvElement::kF32, 16, 2, 128, 128, 64, 1000, 256, 128, 0.0f, true});
  run({"window f16 64 softcap", KvElement::kF16, 4, 1, 256, 256, 64, 777, 256, 100, 30.0f, false});
}

TEST_F(CudaBackendTest, RejectsBadCallsWithAnError) {
  AttentionCall call;
  call.n_tokens = 1;
  call.n_head = 6;
  call.kv.n_head_kv = 4;
  call.kv.head_dim_k = call.kv.head_dim_v = 64;
  call.kv.capacity = 8;
  EXPECT_THROW(gpu_->attention(call), Error);
  RopeConfig config;
  config.n_rot = 7;
  EXPECT_THROW(gpu_->rope(nullptr, 1, 1, 8, 0, config), Error);
  gpu_->synchronize();  // nothing was queued by the failed calls
}

}  // namespace
}  // namespace sluice::test

#else

TEST(CudaBackendTest, Skipped) {
  GTEST_SKIP() << "CUDA backend not built (no nvcc at configure time)";
}

#endif
