// CudaBackend::attention_inputs (cuda_attention_inputs.cu) against the ops it fuses on the same
// backend — rms_norm of q and of k per head, rope of both, kv_store — bit for bit: q and k as
// left in place and every cell. Skips without a CUDA device.
#ifdef SLUICE_HAVE_CUDA

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cuda_test_fixture.h"

namespace sluice::test {
namespace {

struct InputsCase {
  const char* name;
  int64_t n_head, n_head_kv, dk, dv, n_tokens, pos0, capacity;
  bool norms;
  RopeConfig rope;
  KvElement type;
};

class CudaAttentionInputsTest : public CudaDeviceTest {
 protected:
  void run(const InputsCase& c) {
    SCOPED_TRACE(std::string(c.name) + ", " + where());
    const size_t q_n = size_t(c.n_tokens * c.n_head * c.dk);
    const size_t k_n = size_t(c.n_tokens * c.n_head_kv * c.dk);
    const size_t v_n = size_t(c.n_tokens * c.n_head_kv * c.dv);
    const auto q = uniform(q_n, -3.0f, 3.0f), k = uniform(k_n, -3.0f, 3.0f);
    const auto v = uniform(v_n, -3.0f, 3.0f);
    // Weights the backend mirrors by address: kept alive as long as it lives.
    const auto& q_norm = keep(uniform(size_t(c.dk), 0.5f, 1.5f));
    const auto& k_norm = keep(uniform(size_t(c.dk), 0.5f, 1.5f));
    const auto& freq_factors = keep(uniform(size_t(c.rope.n_rot / 2 + 1), 1.0f, 8.0f));
    RopeConfig rope = c.rope;
    if (rope.freq_factors != nullptr) rope.freq_factors = freq_factors.data();
    const size_t elem = c.type == KvElement::kF16 ? 2 : 4;
    const size_t k_cells = size_t(c.capacity * c.n_head_kv * c.dk) * elem;
    const size_t v_cells = size_t(c.capacity * c.n_head_kv * c.dv) * elem;

    // The same inputs twice: fused, and op by op.
    std::vector<float> out_q[2], out_k[2];
    std::vector<uint8_t> out_kc[2], out_vc[2];
    for (int fused = 0; fused < 2; ++fused) {
      auto dq = on_device(q);
      auto dk = on_device(k);
      auto dv = on_device(v);
      auto kc = poisoned_allocation(k_cells);
      auto vc = poisoned_allocation(v_cells);
      KvLayerView kv{c.type, kc->data(), vc->data(), c.capacity, c.n_head_kv, c.dk, c.dv};
      AttentionInputs in;
      in.q = dq->data();
      in.k = dk->data();
      in.v = dv->data();
      in.n_tokens = c.n_tokens;
      in.n_head = c.n_head;
      in.pos0 = c.pos0;
      in.q_norm = c.norms ? q_norm.data() : nullptr;
      in.k_norm = c.norms ? k_norm.data() : nullptr;
      in.norm_eps = 1e-6f;
      in.rope = rope;
      in.kv = kv;
      if (fused == 1) {
        gpu_->attention_inputs(in);
      } else {
        gpu_->Backend::attention_inputs(in);  // the default: the six ops
      }
      out_q[fused] = fetch(*dq, q_n);
      out_k[fused] = fetch(*dk, k_n);
      out_kc[fused] = fetch<uint8_t>(*kc, k_cells);
      out_vc[fused] = fetch<uint8_t>(*vc, v_cells);
    }
    for (size_t i = 0; i < q_n; ++i)
      ASSERT_EQ(ulp_distance(out_q[0][i], out_q[1][i]), 0) << "q " << i;
    for (size_t i = 0; i < k_n; ++i)
      ASSERT_EQ(ulp_distance(out_k[0][i], out_k[1][i]), 0) << "k " << i;
    // Cells never written stay poisoned on both sides; written ones must agree byte for byte.
    EXPECT_EQ(out_kc[0], out_kc[1]) << "K cells";
    EXPECT_EQ(out_vc[0], out_vc[1]) << "V cells";
  }

  const std::vector<float>& keep(std::vector<float> weights) {
    kept_.push_back(std::make_unique<std::vector<float>>(std::move(weights)));
    return *kept_.back();
  }
  std::vector<std::unique_ptr<std::vector<float>>> kept_;
};

RopeConfig rope(RopeStyle style, int64_t n_rot) {
  RopeConfig r;
  r.style = style;
  r.n_rot = n_rot;
  r.freq_base = 1000000.0f;
  return r;
}

TEST_F(CudaAttentionInputsTest, EqualsTheOpsItFuses) {
  run({"qwen3-like decode", 32, 4, 128, 128, 1, 77, 256, true, rope(RopeStyle::kNeox, 128),
       KvElement::kF16});
  run({"llama-like, no norms", 9, 3, 64, 64, 1, 300, 512, false, rope(RopeStyle::kNormal, 64),
       KvElement::kF16});
  run({"gemma-like 256, chunk of 7", 4, 1, 256, 256, 7, 30, 64, true, rope(RopeStyle::kNeox, 256),
       KvElement::kF16});
  run({"wrapping ring, F32 cells", 8, 2, 64, 64, 5, 62, 64, true, rope(RopeStyle::kNeox, 64),
       KvElement::kF32});
  RopeConfig partial = rope(RopeStyle::kNormal, 32);         // partial rotation, frequency factors
  partial.freq_factors = reinterpret_cast<const float*>(1);  // replaced by run()
  run({"partial rotation, dv != dk", 4, 2, 64, 96, 3, 10, 32, false, partial, KvElement::kF16});
  RopeConfig yarn = rope(RopeStyle::kNeox, 128);
  yarn.ext_factor = 1.0f;
  yarn.freq_scale = 0.25f;
  yarn.n_ctx_orig = 4096;
  run({"yarn", 16, 16, 128, 128, 2, 5000, 8192, true, yarn, KvElement::kF16});
  run({"no rope", 4, 4, 64, 64, 2, 3, 16, true, rope(RopeStyle::kNone, 0), KvElement::kF16});
}

}  // namespace
}  // namespace sluice::test

#endif  // SLUICE_HAVE_CUDA
