// The MoE block's stacked paths (what a GPU runs: the choices' products by stack index for a
// decode token, the rows grouped by expert for a chunk) against its per-expert path, on the CPU
// backend, whose stacked ops are one matmul per matrix: the outputs must be bit-identical —
// from the resident file (choices made on the backend for a decode token) and from device slots
// in the CPU backend's memory (choices made on the host, slots looked up), with windows smaller
// than the chunk's experts — and on hybrid placement, the experts on a second CPU backend. Also
// with gpt-oss's MoE (top-k of biased logits, softmax of the chosen, per-expert biases added by
// id after each stacked product, swiglu_oai) and DeepSeek V3's router (sigmoid, selection bias,
// groups): chosen by Backend::select_experts, they must give the host choice's numbers. And with
// per-expert output scales (Gemma 4's ffn_down_exps.scale; gate and up scales too), multiplied
// by id after each stacked product.
#include <gtest/gtest.h>

#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "core/thread_pool.h"
#include "experts/device_expert_slots.h"
#include "experts/resident_experts.h"
#include "model/blocks/moe_ffn.h"
#include "quant/quantize.h"

namespace sluice::model {
namespace {

using experts::ExpertPart;

constexpr int64_t kEmbd = 64, kFf = 32, kExperts = 8, kUsed = 3, kLayers = 2;

class MoeStackedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = uint32_t(std::chrono::steady_clock::now().time_since_epoch().count());
    std::mt19937 rng(seed_);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    path_ = (std::filesystem::path(::testing::TempDir()) /
             ("sluice_moe_stacked_" + std::to_string(::getpid()) + ".bin"))
                .string();
    // Per layer: gate, up [kFf rows of kEmbd], down [kEmbd rows of kFf] stacks; layer 0 F32,
    // layer 1 Q8_0 (quantized activations, the scaled kernels).
    std::ofstream out(path_, std::ios::binary);
    layout_.n_expert_used = kUsed;
    layout_.layers.resize(kLayers);
    uint64_t offset = 0;
    for (int64_t l = 0; l < kLayers; ++l) {
      layout_.layers[size_t(l)].n_expert = kExperts;
      for (ExpertPart p : {ExpertPart::kGate, ExpertPart::kUp, ExpertPart::kDown}) {
        experts::ExpertTensor& t = layout_.layers[size_t(l)].parts[size_t(p)];
        t.name = "blk." + std::to_string(l) + "." + experts::expert_part_name(p);
        t.type = l == 0 ? QType::F32 : QType::Q8_0;
        t.n_cols = p == ExpertPart::kDown ? kFf : kEmbd;
        t.n_rows = p == ExpertPart::kDown ? kEmbd : kFf;
        t.offset = offset;
        t.expert_stride = t.expert_bytes = *row_bytes(t.type, uint64_t(kEmbd * kFf));
        std::vector<float> values(size_t(kExperts * kEmbd * kFf));
        for (float& v : values) v = uniform(rng);
        std::vector<uint8_t> bytes(size_t(t.expert_bytes * kExperts));
        quantize_row(t.type, values.data(), bytes.data(), int64_t(values.size()));
        out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
        offset += t.expert_bytes * kExperts;
      }
    }
    out.close();
    layout_.files.push_back(std::make_shared<File>(File::open(path_)));
    router_.resize(size_t(kEmbd * kExperts));
    for (float& v : router_) v = uniform(rng);
    weights_.router.gate = {QType::F32, router_.data(), kEmbd, kExperts};
    weights_.config.n_expert = kExperts;
    weights_.config.n_expert_used = kUsed;
    weights_.config.norm_weights = true;
    weights_.n_ff = kFf;
    x_.resize(size_t(5 * kEmbd));
    for (float& v : x_) v = uniform(rng);
  }
  void TearDown() override { std::remove(path_.c_str()); }

  std::vector<float> random_values(int64_t n, std::mt19937& rng) {
    std::uniform_real_distribution<float> uniform(-0.5f, 0.5f);
    std::vector<float> values(static_cast<size_t>(n));
    for (float& v : values) v = uniform(rng);
    return values;
  }

  // gpt-oss's MoE: a router bias, top-k on the logits, the softmax of the chosen as weights,
  // per-expert gate / up / down biases and swiglu_oai.
  void make_gpt_oss_like() {
    std::mt19937 rng(seed_ + 1);
    weights_.config.gating = ExpertGating::kSoftmaxWeight;
    weights_.config.norm_weights = false;
    weights_.router.gate_bias = random_values(kExperts, rng);
    weights_.gate_bias = random_values(kExperts * kFf, rng);
    weights_.up_bias = random_values(kExperts * kFf, rng);
    weights_.down_bias = random_values(kExperts * kEmbd, rng);
    weights_.act = GluActivation::kSwigluOai;
  }

  // DeepSeek V3's router: sigmoid, a selection bias (exp_probs_b), 4 groups of 2 experts of which
  // 2 are eligible, normalised and scaled weights.
  void make_deepseek_like() {
    std::mt19937 rng(seed_ + 2);
    weights_.config.gating = ExpertGating::kSigmoid;
    weights_.config.n_group = 4;
    weights_.config.n_group_used = 2;
    weights_.config.weights_scale = 2.5f;
    weights_.router.selection_bias = random_values(kExperts, rng);
  }

  // Per-expert scales of every part's output (Gemma 4 has the down one).
  void make_scaled() {
    std::mt19937 rng(seed_ + 3);
    weights_.gate_scale = random_values(kExperts, rng);
    weights_.up_scale = random_values(kExperts, rng);
    weights_.down_scale = random_values(kExperts, rng);
  }

  // Every placement's stacked numbers against the per-expert path's.
  void expect_stacked_paths_match(const std::string& what) {
    experts::ResidentExperts resident(layout_);
    experts::DeviceExpertSlots slots(std::make_unique<experts::ResidentExperts>(layout_), layout_,
                                     cpu_, 4);
    for (int64_t n : {1, 5}) {
      const std::string tokens = what + ", tokens " + std::to_string(n);
      const std::vector<float> per_expert = run(resident, Path::kPerExpert, n);
      expect_bits(run(resident, Path::kHost, n), per_expert, "host, " + tokens, seed_);
      expect_bits(run(resident, Path::kDevice, n), per_expert, tokens, seed_);
      expect_bits(run(slots, Path::kDevice, n), per_expert, "slots, " + tokens, seed_);
      expect_bits(run_hybrid(resident, n), per_expert, "hybrid, " + tokens, seed_);
    }
  }

  // kPerExpert: the reference. kHost: what the CPU backend does by itself (stacked, the choice
  // made on the host). kDevice: a GPU's paths (the decode's choice made on the backend), on the
  // CPU's ops.
  enum class Path { kPerExpert, kHost, kDevice };

  // Both layers' MoE output for the first n_tokens rows of x_ on `path`.
  std::vector<float> run(experts::ExpertSource& source, Path path, int64_t n_tokens) {
    MoeScratch scratch;
    scratch.reserve(cpu_, weights_, kEmbd, 5);
    if (path == Path::kDevice) {
      scratch.use_stacks(cpu_, weights_, kEmbd);
      scratch.choose_on_backend = true;
    }
    scratch.host_stacks = path == Path::kHost;
    std::vector<float> out(size_t(kLayers * n_tokens * kEmbd));
    for (int64_t l = 0; l < kLayers; ++l) {
      float* layer_out = out.data() + l * n_tokens * kEmbd;
      moe_route(cpu_, weights_, source, l, x_.data(), n_tokens, scratch, {});
      EXPECT_EQ(scratch.selected_on_backend,
                path == Path::kDevice && n_tokens == 1 && source.always_in_stack())
          << "layer " << l << " tokens " << n_tokens;
      moe_compute(cpu_, weights_, source, l, x_.data(), n_tokens, kEmbd, scratch, layer_out, {});
      EXPECT_EQ(scratch.stacked, path != Path::kPerExpert) << "layer " << l;
    }
    return out;
  }

  // The same on hybrid placement: the main backend routes, a second CPU backend on a pool of 2
  // threads computes the experts (by stack for a source with stacks).
  std::vector<float> run_hybrid(experts::ExpertSource& source, int64_t n_tokens) {
    ThreadPool pool(2);
    cpu::CpuBackend expert_cpu(&pool);
    MoeScratch scratch;
    scratch.reserve(cpu_, weights_, kEmbd, 5);
    std::vector<float> out(size_t(kLayers * n_tokens * kEmbd));
    for (int64_t l = 0; l < kLayers; ++l) {
      float* layer_out = out.data() + l * n_tokens * kEmbd;
      moe_route(cpu_, weights_, source, l, x_.data(), n_tokens, scratch, {}, &expert_cpu);
      EXPECT_FALSE(scratch.selected_on_backend) << "layer " << l << " tokens " << n_tokens;
      moe_compute(cpu_, weights_, source, l, x_.data(), n_tokens, kEmbd, scratch, layer_out, {},
                  &expert_cpu);
      EXPECT_TRUE(scratch.hybrid && scratch.hybrid->stacked) << "layer " << l;
    }
    return out;
  }

  static void expect_bits(const std::vector<float>& got, const std::vector<float>& want,
                          const std::string& what, uint32_t seed) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
          << what << " at " << i << ": " << got[i] << " vs " << want[i] << " (seed " << seed << ")";
    }
  }

  uint32_t seed_ = 0;
  std::string path_;
  experts::ExpertLayout layout_;
  std::vector<float> router_, x_;
  MoeFfnWeights weights_;
  cpu::CpuBackend cpu_{nullptr};
};

TEST_F(MoeStackedTest, ResidentStacksGiveThePerExpertNumbers) {
  experts::ResidentExperts resident(layout_);
  ExpertStack stack;
  ASSERT_TRUE(resident.stack(1, ExpertPart::kDown, stack));
  EXPECT_EQ(stack.count, kExperts);
  EXPECT_EQ(stack.n_cols, kFf);
  for (int64_t n : {1, 5}) {
    const std::vector<float> per_expert = run(resident, Path::kPerExpert, n);
    expect_bits(run(resident, Path::kDevice, n), per_expert, "tokens " + std::to_string(n), seed_);
    expect_bits(run(resident, Path::kHost, n), per_expert, "host, tokens " + std::to_string(n),
                seed_);
  }
}

TEST_F(MoeStackedTest, DeviceSlotsGiveTheResidentNumbers) {
  experts::ResidentExperts resident(layout_);
  // 4 slots: a 5-token chunk's experts come in windows of 4; decode's 3 choices fit.
  experts::DeviceExpertSlots slots(std::make_unique<experts::ResidentExperts>(layout_), layout_,
                                   cpu_, 4);
  ASSERT_FALSE(slots.always_in_stack());
  for (int64_t n : {1, 5}) {
    const std::vector<float> reference = run(resident, Path::kPerExpert, n);
    expect_bits(run(slots, Path::kDevice, n), reference, "slots, tokens " + std::to_string(n),
                seed_);
  }
}

TEST_F(MoeStackedTest, HybridStacksGiveThePlainNumbers) {
  experts::ResidentExperts resident(layout_);
  for (int64_t n : {1, 5}) {
    const std::vector<float> plain = run(resident, Path::kPerExpert, n);
    expect_bits(run_hybrid(resident, n), plain, "hybrid, tokens " + std::to_string(n), seed_);
  }
}

TEST_F(MoeStackedTest, BiasedExpertsGiveThePerExpertNumbers) {
  make_gpt_oss_like();
  expect_stacked_paths_match("gpt-oss");
}

TEST_F(MoeStackedTest, SigmoidGroupedRouterGivesTheHostChoice) {
  make_deepseek_like();
  expect_stacked_paths_match("deepseek");
}

TEST_F(MoeStackedTest, ScaledExpertsGiveThePerExpertNumbers) {
  make_scaled();
  expect_stacked_paths_match("scaled");
}

// The scales do change the output, each of them (a stacked path that skipped one would fail
// above only if the per-expert path skipped it too).
TEST_F(MoeStackedTest, ExpertScalesChangeTheOutput) {
  experts::ResidentExperts resident(layout_);
  make_scaled();
  const std::vector<float> scaled = run(resident, Path::kDevice, 1);
  for (std::vector<float>* scales :
       {&weights_.gate_scale, &weights_.up_scale, &weights_.down_scale}) {
    const std::vector<float> kept = *scales;
    scales->clear();
    const std::vector<float> unscaled = run(resident, Path::kDevice, 1);
    *scales = kept;
    ASSERT_EQ(scaled.size(), unscaled.size());
    EXPECT_NE(std::memcmp(scaled.data(), unscaled.data(), scaled.size() * sizeof(float)), 0);
  }
}

// The biases do change the output (a stacked path that skipped them would fail above).
TEST_F(MoeStackedTest, ExpertBiasesChangeTheOutput) {
  experts::ResidentExperts resident(layout_);
  make_gpt_oss_like();
  const std::vector<float> biased = run(resident, Path::kDevice, 1);
  weights_.down_bias.clear();
  const std::vector<float> unbiased = run(resident, Path::kDevice, 1);
  ASSERT_EQ(biased.size(), unbiased.size());
  EXPECT_NE(std::memcmp(biased.data(), unbiased.data(), biased.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace sluice::model
