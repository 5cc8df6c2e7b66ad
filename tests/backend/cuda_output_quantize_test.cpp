// A decode norm or GLU that also quantizes its output for the product reading it next (the norm
// kernels' RowQuantize, cuda_norm.cu, and the GLU + quantize kernel; when:
// output_quantize_plan.h). On fresh random data each run (the seed in every failure message),
// outputs poisoned before each launch:
//   - for rms_norm, add_rms_norm and post_norm_add_rms_norm, every activation format (Q8_K for
//     the K and IQ types, Q8_0, Q8_1 for Q4_1), one to eight tokens, a matmul and a
//     matmul_shared_input reader: the second step (the norm now quantizes, the reader takes its
//     activations — counted by quantized_outputs()) gives x, branch, the norm and the products
//     BIT-EQUAL to the first (plain norm, the reader quantizing);
//   - an op between the norm and its reader that rewrites the norm's output: the reader reads
//     the new values, as a backend that never fused gives them;
//   - readers that want another format: the right numbers, and the norm never quantizes again;
//   - recorded steps (CUDA graphs) through the learning: bit for bit a plain backend's;
//   - a GLU over a decode step's expert choices and the experts' down product by id (the MoE
//     decode): the fused step's gate and products bit-equal to the plain one's, every format.
// Skips visibly without the CUDA backend or a device.
#include <gtest/gtest.h>

#ifdef SLUICE_HAVE_CUDA

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda_test_fixture.h"
#include "backend/quant_test_data.h"
#include "quant/qtype.h"
#include "sluice/error.h"

namespace sluice::test {
namespace {

constexpr float kEps = 1e-5f;

enum class NormKind { kRms, kAddRms, kPostNormAddRms };

const char* name_of(NormKind kind) {
  switch (kind) {
    case NormKind::kRms:
      return "rms_norm";
    case NormKind::kAddRms:
      return "add_rms_norm";
    case NormKind::kPostNormAddRms:
      return "post_norm_add_rms_norm";
  }
  return "?";
}

class CudaOutputQuantizeTest : public CudaDeviceTest {
 protected:
  // One norm and its inputs, on one backend's buffers (the same addresses every step, as a
  // model's are: the plan knows a norm by its weight and output).
  struct Layer {
    NormKind kind;
    int64_t n_tokens, n;
    std::vector<float> weight, post_weight;  // host: the backend mirrors them by address
    std::unique_ptr<Allocation> x, branch, xn;
  };
  struct Outputs {
    std::vector<float> x, branch, xn, y0, y1;
  };

  Layer layer(Backend& b, NormKind kind, int64_t n_tokens, int64_t n) {
    const size_t count = size_t(n_tokens * n);
    Layer l{kind,
            n_tokens,
            n,
            uniform(size_t(n), 0.5f, 1.5f),
            uniform(size_t(n), 0.5f, 1.5f),
            std::make_unique<Allocation>(b, count * 4),
            std::make_unique<Allocation>(b, count * 4),
            std::make_unique<Allocation>(b, count * 4)};
    return l;
  }

  // The same norm (the same host weights) on another backend's buffers.
  Layer twin(Backend& b, const Layer& l) {
    Layer t = layer(b, l.kind, l.n_tokens, l.n);
    t.weight = l.weight, t.post_weight = l.post_weight;
    return t;
  }

  void run_norm(Backend& b, const Layer& l) {
    switch (l.kind) {
      case NormKind::kRms:
        b.rms_norm(l.x->data(), l.weight.data(), l.xn->data(), l.n_tokens, l.n, kEps);
        break;
      case NormKind::kAddRms:
        b.add_rms_norm(l.x->data(), l.branch->data(), l.weight.data(), l.xn->data(), l.n_tokens,
                       l.n, kEps);
        break;
      case NormKind::kPostNormAddRms:
        b.post_norm_add_rms_norm(l.x->data(), l.branch->data(), l.post_weight.data(), kEps,
                                 l.weight.data(), l.xn->data(), l.n_tokens, l.n, kEps);
        break;
    }
  }

  // One step: inputs uploaded, the norm, `between` (may be empty), then the reader — a matmul of
  // w0, or with w1 a matmul_shared_input of both — into y0 (and y1); everything downloaded.
  template <class Between>
  Outputs step(Backend& b, const Layer& l, const std::vector<float>& x,
               const std::vector<float>& branch, const MatrixView& w0, const MatrixView* w1,
               Allocation& y0, Allocation& y1, Between&& between) {
    const size_t count = size_t(l.n_tokens * l.n);
    b.upload(l.x->data(), x.data(), count * 4);
    b.upload(l.branch->data(), branch.data(), count * 4);
    run_norm(b, l);
    between();
    if (w1 == nullptr) {
      b.matmul(w0, l.xn->data(), y0.data(), l.n_tokens);
    } else {
      const MatrixView ws[2] = {w0, *w1};
      float* const ys[2] = {y0.data(), y1.data()};
      b.matmul_shared_input(ws, ys, 2, l.xn->data(), l.n_tokens);
    }
    Outputs o{std::vector<float>(count), std::vector<float>(count), std::vector<float>(count),
              std::vector<float>(size_t(l.n_tokens * w0.n_rows)),
              std::vector<float>(w1 ? size_t(l.n_tokens * w1->n_rows) : 0)};
    b.download(o.x.data(), l.x->data(), count * 4);
    b.download(o.branch.data(), l.branch->data(), count * 4);
    b.download(o.xn.data(), l.xn->data(), count * 4);
    b.download(o.y0.data(), y0.data(), o.y0.size() * 4);
    if (w1) b.download(o.y1.data(), y1.data(), o.y1.size() * 4);
    return o;
  }

  void expect_same(const Outputs& got, const Outputs& expected, const std::string& what) {
    expect_bits(got.x, expected.x, what + ": x");
    expect_bits(got.xn, expected.xn, what + ": the norm");
    if (!expected.branch.empty()) expect_bits(got.branch, expected.branch, what + ": branch");
    expect_bits(got.y0, expected.y0, what + ": y0");
    if (!expected.y1.empty()) expect_bits(got.y1, expected.y1, what + ": y1");
  }

  // Poison in the outputs before a step: an element no launch wrote cannot pass.
  void poison_all(Allocation& xn, size_t xn_bytes, Allocation& y0, Allocation& y1, size_t y_bytes) {
    cuda::fill_bytes(xn.data(), 0xff, xn_bytes, gpu_->stream());
    cuda::fill_bytes(y0.data(), 0xff, y_bytes, gpu_->stream());
    cuda::fill_bytes(y1.data(), 0xff, y_bytes, gpu_->stream());
  }
};

TEST_F(CudaOutputQuantizeTest, FusedStepEqualsThePlainOneBitForBit) {
  const int64_t n = 512, n_out = 96;
  for (NormKind kind : {NormKind::kRms, NormKind::kAddRms, NormKind::kPostNormAddRms}) {
    for (QType type : {QType::Q4_K, QType::IQ4_XS, QType::Q8_0, QType::Q4_1}) {
      for (int64_t n_tokens : {1, 3, 8}) {
        for (bool shared : {false, true}) {
          // A fresh backend: freed buffers' addresses come back, and the plan knows a norm by
          // its addresses (a recycled one would arrive already taught).
          gpu_ = std::make_unique<cuda::CudaBackend>();
          const std::string what = std::string(name_of(kind)) + ", " +
                                   std::string(qtype_name(type)) + ", " + std::to_string(n_tokens) +
                                   " tokens" + (shared ? ", shared input" : "");
          const auto w0 = random_weight_rows(type, n_out, n, rng_);
          const auto w1 = random_weight_rows(type, n_out + 32, n, rng_);
          const MatrixView v0{type, w0.data(), n, n_out}, v1{type, w1.data(), n, n_out + 32};
          const Layer l = layer(*gpu_, kind, n_tokens, n);
          Allocation y0(*gpu_, size_t(n_tokens * (n_out + 32)) * 4);
          Allocation y1(*gpu_, size_t(n_tokens * (n_out + 32)) * 4);
          const size_t count = size_t(n_tokens * n);
          const auto x = uniform(count, -3.0f, 3.0f);
          const auto branch = uniform(count, -40.0f, 40.0f);
          const size_t y_bytes = size_t(n_tokens * (n_out + 32)) * 4;
          const uint64_t fused0 = gpu_->quantized_outputs();
          poison_all(*l.xn, count * 4, y0, y1, y_bytes);
          const Outputs plain =
              step(*gpu_, l, x, branch, v0, shared ? &v1 : nullptr, y0, y1, [] {});
          EXPECT_EQ(gpu_->quantized_outputs(), fused0) << what << ": fused before learning";
          poison_all(*l.xn, count * 4, y0, y1, y_bytes);
          const Outputs fused =
              step(*gpu_, l, x, branch, v0, shared ? &v1 : nullptr, y0, y1, [] {});
          EXPECT_EQ(gpu_->quantized_outputs(), fused0 + 1)
              << what << ": not fused (" << where() << ")";
          expect_same(fused, plain, what);
        }
      }
    }
  }
}

TEST_F(CudaOutputQuantizeTest, AnOpBetweenNormAndReaderIsSeen) {
  const int64_t n = 1024, n_out = 64, n_tokens = 2;
  const auto w = random_weight_rows(QType::Q4_K, n_out, n, rng_);
  const MatrixView view{QType::Q4_K, w.data(), n, n_out};
  cuda::CudaBackend never_fused;
  const Layer l = layer(*gpu_, NormKind::kAddRms, n_tokens, n);
  const Layer ref = twin(never_fused, l);
  Allocation y(*gpu_, size_t(n_tokens * n_out) * 4), unused(*gpu_, 4);
  Allocation ref_y(never_fused, size_t(n_tokens * n_out) * 4), ref_unused(never_fused, 4);
  const size_t count = size_t(n_tokens * n);
  const auto x = uniform(count, -3.0f, 3.0f);
  const auto branch = uniform(count, -40.0f, 40.0f);
  step(*gpu_, l, x, branch, view, nullptr, y, unused, [] {});  // learns Q8_K
  const uint64_t fused0 = gpu_->quantized_outputs();
  const Outputs got = step(*gpu_, l, x, branch, view, nullptr, y, unused,
                           [&] { gpu_->scale(l.xn->data(), 3.0f, int64_t(count)); });
  EXPECT_EQ(gpu_->quantized_outputs(), fused0 + 1) << where();  // the norm quantized, unread
  const Outputs expected = step(never_fused, ref, x, branch, view, nullptr, ref_y, ref_unused,
                                [&] { never_fused.scale(ref.xn->data(), 3.0f, int64_t(count)); });
  EXPECT_EQ(never_fused.quantized_outputs(), 0u);
  expect_same(got, expected, "scaled between norm and matmul");
}

TEST_F(CudaOutputQuantizeTest, ReadersOfAnotherFormatEndTheFusion) {
  const int64_t n = 512, n_out = 64, n_tokens = 1;
  const auto wk = random_weight_rows(QType::Q4_K, n_out, n, rng_);
  const auto w0 = random_weight_rows(QType::Q8_0, n_out, n, rng_);
  const MatrixView k_view{QType::Q4_K, wk.data(), n, n_out},
      q8_view{QType::Q8_0, w0.data(), n, n_out};
  cuda::CudaBackend reference;
  const Layer l = layer(*gpu_, NormKind::kRms, n_tokens, n);
  const Layer ref = twin(reference, l);
  Allocation y(*gpu_, size_t(n_out) * 4), unused(*gpu_, 4);
  Allocation ref_y(reference, size_t(n_out) * 4), ref_unused(reference, 4);
  const auto x = uniform(size_t(n), -3.0f, 3.0f), branch = uniform(size_t(n), -1.0f, 1.0f);
  step(*gpu_, l, x, branch, k_view, nullptr, y, unused, [] {});  // learns Q8_K
  const uint64_t fused0 = gpu_->quantized_outputs();
  for (int i = 0; i < 3; ++i) {
    const Outputs got = step(*gpu_, l, x, branch, q8_view, nullptr, y, unused, [] {});
    const Outputs expected =
        step(reference, ref, x, branch, q8_view, nullptr, ref_y, ref_unused, [] {});
    expect_same(got, expected, "Q8_0 reader, step " + std::to_string(i));
  }
  // Only the first of those steps' norms quantized (for the Q4_K reader it had learned).
  EXPECT_EQ(gpu_->quantized_outputs(), fused0 + 1) << where();
}

// Decode steps recorded as CUDA graphs while the plan learns: once the norm quantizes, its op
// differs from a recording made before (that step runs unrecorded), a capture follows and the
// rest replay it — every step bit for bit a plain backend's. (A first capture may also fail
// for a first-time allocation: at most two captures, the last three steps replays.)
TEST_F(CudaOutputQuantizeTest, RecordedStepsThroughTheLearningEqualPlainOnes) {
  const int64_t n = 1024, n_out = 128, n_tokens = 1;
  const auto w = random_weight_rows(QType::Q4_K, n_out, n, rng_);
  const MatrixView view{QType::Q4_K, w.data(), n, n_out};
  cuda::CudaBackend plain;
  const Layer l = layer(*gpu_, NormKind::kAddRms, n_tokens, n);
  const Layer ref = twin(plain, l);
  Allocation y(*gpu_, size_t(n_out) * 4), unused(*gpu_, 4);
  Allocation ref_y(plain, size_t(n_out) * 4), ref_unused(plain, 4);
  const uint64_t captures0 = gpu_->captured_steps(), replays0 = gpu_->replayed_steps();
  for (int i = 0; i < 6; ++i) {
    const auto x = uniform(size_t(n), -3.0f, 3.0f), branch = uniform(size_t(n), -40.0f, 40.0f);
    Outputs got;
    try {
      ASSERT_TRUE(gpu_->begin_recorded_step());
      got = step(*gpu_, l, x, branch, view, nullptr, y, unused, [] {});
      gpu_->end_recorded_step();
    } catch (const Error&) {  // as the model does: the step again, unrecorded
      gpu_->abort_recorded_step();
      got = step(*gpu_, l, x, branch, view, nullptr, y, unused, [] {});
    }
    const Outputs expected = step(plain, ref, x, branch, view, nullptr, ref_y, ref_unused, [] {});
    expect_same(got, expected, "recorded step " + std::to_string(i));
  }
  EXPECT_LE(gpu_->captured_steps() - captures0, 2u) << where();
  EXPECT_GE(gpu_->replayed_steps() - replays0, 3u) << where();
  EXPECT_GE(gpu_->quantized_outputs(), 4u) << where();
}

TEST_F(CudaOutputQuantizeTest, GluThenExpertsDownEqualsThePlainStep) {
  const int64_t n_ff = 512, n_out = 96, n_expert = 6;
  for (QType type : {QType::Q4_K, QType::Q8_0, QType::Q4_1}) {
    for (int64_t k : {1, 4, 8}) {
      gpu_ = std::make_unique<cuda::CudaBackend>();  // a fresh plan (see above)
      const std::string what =
          std::string(qtype_name(type)) + ", " + std::to_string(k) + " choices";
      const std::vector<uint8_t> w = random_weight_rows(type, n_expert * n_out, n_ff, rng_);
      const ExpertStack stack{type, w.data(), int64_t(w.size()) / n_expert, n_expert, n_ff, n_out};
      std::vector<int32_t> ids(static_cast<size_t>(k));
      for (int64_t c = 0; c < k; ++c) ids[size_t(c)] = int32_t((c * 5 + 1) % n_expert);
      auto d_ids = on_device(ids);
      const auto gate = uniform(size_t(k * n_ff), -8.0f, 8.0f);
      const auto up = uniform(size_t(k * n_ff), -4.0f, 4.0f);
      auto d_gate = on_device(gate), d_up = on_device(up);
      auto y = poisoned_allocation(size_t(k * n_out) * 4);
      const auto run = [&] {
        gpu_->upload(d_gate->data(), gate.data(), gate.size() * 4);
        cuda::fill_bytes(y->data(), 0xff, size_t(k * n_out) * 4, gpu_->stream());
        gpu_->glu(GluActivation::kSilu, d_gate->data(), d_up->data(), k, n_ff);
        gpu_->matmul_experts(stack, d_ids->as<int32_t>(), k, d_gate->data(), false, y->data());
        return std::make_pair(fetch(*d_gate, gate.size()), fetch(*y, size_t(k * n_out)));
      };
      const auto plain = run();
      EXPECT_EQ(gpu_->quantized_outputs(), 0u) << what;
      const auto fused = run();
      EXPECT_EQ(gpu_->quantized_outputs(), 1u) << what << ": not fused (" << where() << ")";
      expect_bits(fused.first, plain.first, what + ": gate");
      expect_bits(fused.second, plain.second, what + ": y");
    }
  }
}

}  // namespace
}  // namespace sluice::test

#else

TEST(CudaOutputQuantizeTest, Skipped) {
  GTEST_SKIP() << "CUDA backend not built (no nvcc at configure time)";
}

#endif
