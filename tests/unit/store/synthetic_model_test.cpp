// The synthetic-model generator through the public API: tiny-moe is a valid qwen3moe GGUF (keys,
// tensor names, shapes, types), its vocabulary loads, its values are finite with the intended
// spread, the same seed gives the same bytes, and bad names are errors that name them; tiny-llama
// is a valid llama GGUF, and the llama-3.1-8b plan (not written) has that model's size.
#include "sluice/synthetic_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include "core/half.h"
#include "format/model_file_open.h"
#include "quant/blocks.h"
#include "quant/dequantize.h"
#include "sluice/error.h"
#include "sluice/tokenizer.h"
#include "store/synthetic_geometry.h"
#include "store/synthetic_plan.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;

class SyntheticModel : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sluice_synth_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, SyntheticModelOptions options) {
    const std::string path = (dir_ / name).string();
    write_synthetic_model(path, options);
    return path;
  }

  static std::vector<char> bytes_of(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  fs::path dir_;
};

SyntheticModelOptions tiny(uint64_t seed = 7) {
  SyntheticModelOptions options;
  options.geometry = "tiny-moe";
  options.seed = seed;
  return options;
}

// The error `write` throws, or "" when it does not throw.
std::string error_of(const std::function<void()>& write) {
  try {
    write();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_F(SyntheticModel, TinyMoeIsAQwen3MoeFile) {
  const std::string path = (dir_ / "tiny.gguf").string();
  uint64_t last_done = 0, last_total = 0;
  const SyntheticModelSummary summary =
      write_synthetic_model(path, tiny(), [&](uint64_t done, uint64_t total) {
        EXPECT_GE(done, last_done);
        last_done = done, last_total = total;
      });
  EXPECT_EQ(last_done, last_total);
  EXPECT_EQ(summary.tensor_bytes, last_total);
  EXPECT_EQ(summary.file_bytes, fs::file_size(path));
  EXPECT_EQ(summary.layers, 4u);
  EXPECT_EQ(summary.type, "Q8_0");
  EXPECT_EQ(summary.expert_type, "Q4_K");

  const ModelFile model = read_model_file(path);
  EXPECT_EQ(model.get_string("general.architecture"), "qwen3moe");
  EXPECT_EQ(model.get_u32("qwen3moe.block_count"), 4u);
  EXPECT_EQ(model.get_u32("qwen3moe.embedding_length"), 256u);
  EXPECT_EQ(model.get_u32("qwen3moe.attention.head_count"), 4u);
  EXPECT_EQ(model.get_u32("qwen3moe.attention.head_count_kv"), 2u);
  EXPECT_EQ(model.get_u32("qwen3moe.attention.key_length"), 64u);
  EXPECT_EQ(model.get_u32("qwen3moe.attention.value_length"), 64u);
  EXPECT_EQ(model.get_u32("qwen3moe.expert_count"), 16u);
  EXPECT_EQ(model.get_u32("qwen3moe.expert_used_count"), 4u);
  EXPECT_EQ(model.get_u32("qwen3moe.expert_feed_forward_length"), 256u);
  EXPECT_EQ(model.get_f32("qwen3moe.rope.freq_base"), 1e6f);
  EXPECT_EQ(model.get_f32("qwen3moe.attention.layer_norm_rms_epsilon"), 1e-6f);
  EXPECT_EQ(model.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(model.get_array("tokenizer.ggml.tokens").array_length(), 512u);
  EXPECT_EQ(model.get_array("tokenizer.ggml.merges").array_length(), 512u - 256 - 3);

  ASSERT_EQ(model.tensors().size(), 3u + 4 * 12);
  auto expect = [&](const std::string& name, QType type, std::vector<uint64_t> shape) {
    const TensorInfo& tensor = model.tensor(name);
    EXPECT_EQ(tensor.type, type) << name;
    EXPECT_EQ(std::vector<uint64_t>(tensor.shape().begin(), tensor.shape().end()), shape) << name;
  };
  expect("token_embd.weight", QType::Q8_0, {256, 512});
  expect("output_norm.weight", QType::F32, {256});
  expect("output.weight", QType::Q8_0, {256, 512});
  for (int layer : {0, 3}) {
    const std::string blk = "blk." + std::to_string(layer) + ".";
    expect(blk + "attn_norm.weight", QType::F32, {256});
    expect(blk + "attn_q.weight", QType::Q8_0, {256, 256});
    expect(blk + "attn_k.weight", QType::Q8_0, {256, 128});
    expect(blk + "attn_v.weight", QType::Q8_0, {256, 128});
    expect(blk + "attn_output.weight", QType::Q8_0, {256, 256});
    expect(blk + "attn_q_norm.weight", QType::F32, {64});
    expect(blk + "attn_k_norm.weight", QType::F32, {64});
    expect(blk + "ffn_norm.weight", QType::F32, {256});
    expect(blk + "ffn_gate_inp.weight", QType::F32, {256, 16});
    expect(blk + "ffn_gate_exps.weight", QType::Q4_K, {256, 256, 16});
    expect(blk + "ffn_up_exps.weight", QType::Q4_K, {256, 256, 16});
    expect(blk + "ffn_down_exps.weight", QType::Q4_K, {256, 256, 16});
  }
}

TEST_F(SyntheticModel, VocabularyTokenizesAndRoundTrips) {
  const std::string path = write("tiny.gguf", tiny());
  const TextTokenizer tokenizer = TextTokenizer::from_model_file(path);
  EXPECT_EQ(tokenizer.n_vocab(), 512u);
  EXPECT_EQ(tokenizer.eos_id(), 511);
  EXPECT_TRUE(tokenizer.is_end_of_generation(511));
  const std::string text = "Hello, world!\n\xc3\xa9t\xc3\xa9 42";
  const std::vector<int32_t> ids = tokenizer.encode(text);
  EXPECT_FALSE(ids.empty());
  EXPECT_LT(ids.size(), text.size());  // merges apply
  EXPECT_EQ(tokenizer.decode(ids), text);
  EXPECT_EQ(tokenizer.encode("<|im_start|>", true), std::vector<int32_t>{510});
  EXPECT_FALSE(tokenizer.chat_template().empty());
}

TEST_F(SyntheticModel, ValuesAreFiniteWithTheIntendedSpread) {
  const std::string path = write("tiny.gguf", tiny());
  const ModelFile model = read_model_file(path);
  for (const TensorInfo& tensor : model.tensors()) {
    const auto bytes = model.tensor_bytes(tensor);
    std::vector<float> values(tensor.n_elements);
    dequantize_row(tensor.type, bytes.data(), values.data(), int64_t(tensor.n_elements));
    double sum = 0, squares = 0;
    for (float v : values) {
      ASSERT_TRUE(std::isfinite(v)) << tensor.name;
      sum += v, squares += double(v) * v;
    }
    const double mean = sum / double(values.size());
    const double rms = std::sqrt(squares / double(values.size()));
    if (tensor.n_dims == 1) {  // norms: 1 ± 0.1
      EXPECT_NEAR(mean, 1.0, 0.02) << tensor.name;
      continue;
    }
    double expected = 1.0 / std::sqrt(double(tensor.ne[0]));
    if (tensor.name == "token_embd.weight") expected = 1.0;
    if (tensor.name.ends_with("ffn_gate_inp.weight")) expected *= 3;
    EXPECT_NEAR(rms / expected, 1.0, 0.1) << tensor.name;
    EXPECT_NEAR(mean / expected, 0.0, 0.05) << tensor.name;
  }
  // The scales themselves: finite, positive halves.
  const TensorInfo& experts = model.tensor("blk.1.ffn_up_exps.weight");
  const auto* q4k = reinterpret_cast<const BlockQ4_K*>(model.tensor_bytes(experts).data());
  for (uint64_t b = 0; b < experts.n_elements / kQK_K; ++b) {
    ASSERT_TRUE(std::isfinite(fp16_to_fp32(q4k[b].d)) && fp16_to_fp32(q4k[b].d) > 0);
    ASSERT_TRUE(std::isfinite(fp16_to_fp32(q4k[b].dmin)) && fp16_to_fp32(q4k[b].dmin) > 0);
  }
  const TensorInfo& attention = model.tensor("blk.1.attn_q.weight");
  const auto* q8 = reinterpret_cast<const BlockQ8_0*>(model.tensor_bytes(attention).data());
  for (uint64_t b = 0; b < attention.n_elements / kQK8_0; ++b) {
    ASSERT_TRUE(std::isfinite(fp16_to_fp32(q8[b].d)) && fp16_to_fp32(q8[b].d) > 0);
  }
}

TEST_F(SyntheticModel, SameSeedSameBytesOtherSeedOtherBytes) {
  const auto a = bytes_of(write("a.gguf", tiny(7)));
  const auto b = bytes_of(write("b.gguf", tiny(7)));
  const auto c = bytes_of(write("c.gguf", tiny(8)));
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), c.size());  // only the seed in the description and the weights differ
  EXPECT_NE(a, c);
}

TEST_F(SyntheticModel, EveryTypeAndTheLayerCountCanBeChosen) {
  for (const char* type :
       {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q6_K", "MXFP4", "Q2_K", "IQ2_XXS"}) {
    SyntheticModelOptions options = tiny();
    options.type = "F16";
    options.expert_type = type;
    options.layers = 1;
    const std::string path = write(std::string(type) + ".gguf", options);
    const ModelFile model = read_model_file(path);
    EXPECT_EQ(model.get_u32("qwen3moe.block_count"), 1u);
    EXPECT_EQ(model.tensors().size(), 3u + 12);
    EXPECT_EQ(model.tensor("blk.0.attn_v.weight").type, QType::F16);
    const TensorInfo& down = model.tensor("blk.0.ffn_down_exps.weight");
    EXPECT_EQ(qtype_name(down.type), type);
    std::vector<float> values(down.n_elements);
    dequantize_row(down.type, model.tensor_bytes(down).data(), values.data(),
                   int64_t(down.n_elements));
    double sum = 0, squares = 0;
    for (float v : values) {
      ASSERT_TRUE(std::isfinite(v)) << type;
      sum += v, squares += double(v) * v;
    }
    // rms 1/sqrt(256); MXFP4's power-of-two scales land within a factor of sqrt(2).
    const double rms = std::sqrt(squares / double(values.size())) * 16;
    EXPECT_GT(rms, 0.7) << type;
    EXPECT_LT(rms, 1.42) << type;
    EXPECT_NEAR(sum / double(values.size()) * 16, 0.0, 0.02) << type;
  }
  SyntheticModelOptions options = tiny();
  options.type = "Q6_K";  // sets the experts' type too
  const ModelFile model = read_model_file(write("q6k.gguf", options));
  EXPECT_EQ(model.tensor("blk.0.ffn_gate_exps.weight").type, QType::Q6_K);
}

// deepseek4's hash-routed layers read their experts from a token → experts table: every row
// must hold n_expert_used distinct ids below n_expert, or the forward would index out of range.
TEST_F(SyntheticModel, HashRoutingTableHoldsValidDistinctExperts) {
  SyntheticModelOptions options;
  options.geometry = "tiny-deepseek4";
  const ModelFile model = read_model_file(write("ds4.gguf", options));
  const uint32_t n_expert = model.get_u32("deepseek4.expert_count");
  const uint32_t n_used = model.get_u32("deepseek4.expert_used_count");
  for (const char* name : {"blk.0.ffn_gate_tid2eid.weight", "blk.1.ffn_gate_tid2eid.weight"}) {
    const TensorInfo& table = model.tensor(name);
    ASSERT_EQ(table.type, QType::I32);
    ASSERT_EQ(table.ne[0], n_used);
    const auto* ids = reinterpret_cast<const int32_t*>(model.tensor_bytes(table).data());
    std::vector<int> seen_total(n_expert, 0);
    for (uint64_t row = 0; row < table.ne[1]; ++row) {
      std::vector<bool> seen(n_expert, false);
      for (uint32_t j = 0; j < n_used; ++j) {
        const int32_t id = ids[row * n_used + j];
        ASSERT_TRUE(id >= 0 && uint32_t(id) < n_expert) << name << " row " << row;
        ASSERT_FALSE(seen[size_t(id)]) << name << " row " << row << " repeats expert " << id;
        seen[size_t(id)] = true;
        ++seen_total[size_t(id)];
      }
    }
    for (int count : seen_total) EXPECT_GT(count, 0) << name << ": an expert no token uses";
  }
  EXPECT_EQ(model.find_tensor("blk.2.ffn_gate_tid2eid.weight"), nullptr);  // score-routed
}

// The dense llama layout: exactly the tensors and keys llama.cpp's converter writes for
// LLM_ARCH_LLAMA, Q4_K by default, with the FFN width apart from every other dimension.
TEST_F(SyntheticModel, TinyLlamaIsALlamaFile) {
  SyntheticModelOptions options;
  options.geometry = "tiny-llama";
  const std::string path = (dir_ / "llama.gguf").string();
  const SyntheticModelSummary summary = write_synthetic_model(path, options);
  EXPECT_EQ(summary.architecture, "llama");
  EXPECT_EQ(summary.type, "Q4_K");
  const ModelFile model = read_model_file(path);
  EXPECT_EQ(model.get_string("general.architecture"), "llama");
  EXPECT_EQ(model.get_u32("llama.block_count"), 3u);
  EXPECT_EQ(model.get_u32("llama.embedding_length"), 256u);
  EXPECT_EQ(model.get_u32("llama.feed_forward_length"), 768u);
  EXPECT_EQ(model.get_u32("llama.attention.head_count"), 4u);
  EXPECT_EQ(model.get_u32("llama.attention.head_count_kv"), 2u);
  EXPECT_EQ(model.get_u32("llama.attention.key_length"), 64u);
  EXPECT_EQ(model.get_u32("llama.attention.value_length"), 64u);
  EXPECT_EQ(model.get_u32("llama.rope.dimension_count"), 64u);
  EXPECT_EQ(model.get_f32("llama.rope.freq_base"), 500000.0f);
  EXPECT_EQ(model.get_f32("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  ASSERT_EQ(model.tensors().size(), 3u + 3 * 9);
  auto expect = [&](const std::string& name, QType type, std::vector<uint64_t> shape) {
    const TensorInfo& tensor = model.tensor(name);
    EXPECT_EQ(tensor.type, type) << name;
    EXPECT_EQ(std::vector<uint64_t>(tensor.shape().begin(), tensor.shape().end()), shape) << name;
  };
  expect("token_embd.weight", QType::Q4_K, {256, 512});
  expect("output_norm.weight", QType::F32, {256});
  expect("output.weight", QType::Q4_K, {256, 512});
  for (int layer : {0, 2}) {
    const std::string blk = "blk." + std::to_string(layer) + ".";
    expect(blk + "attn_norm.weight", QType::F32, {256});
    expect(blk + "attn_q.weight", QType::Q4_K, {256, 256});
    expect(blk + "attn_k.weight", QType::Q4_K, {256, 128});
    expect(blk + "attn_v.weight", QType::Q4_K, {256, 128});
    expect(blk + "attn_output.weight", QType::Q4_K, {256, 256});
    expect(blk + "ffn_norm.weight", QType::F32, {256});
    expect(blk + "ffn_gate.weight", QType::Q4_K, {256, 768});
    expect(blk + "ffn_up.weight", QType::Q4_K, {256, 768});
    expect(blk + "ffn_down.weight", QType::Q4_K, {768, 256});
  }
}

// The 8B row without writing 4.5 GB: the plan has Llama 3.1 8B's 8.03 billion parameters
// (hidden 4096, 32 layers, FFN 14336, 8 KV heads of 128, vocab 128256) at 4.5 bits each.
TEST(SyntheticLlama8b, PlanHasTheParameterCountOfLlama31_8b) {
  const SyntheticGeometry& g = find_synthetic_geometry("llama-3.1-8b");
  TensorPlan plan;
  ArchKeys keys(g.architecture);
  synthetic_planner(g.architecture)({g, g.n_layer, {g.type, g.expert_type}}, plan, keys);
  ASSERT_EQ(plan.tensors().size(), 3u + 32 * 9);
  uint64_t parameters = 0, bytes = 0;
  for (const PlannedTensor& tensor : plan.tensors()) {
    parameters += tensor.n_elements;
    bytes += tensor.n_bytes;
    if (tensor.shape.size() == 2) {
      EXPECT_EQ(tensor.type, QType::Q4_K) << tensor.name;
    }
  }
  EXPECT_EQ(parameters, 8030261248ull);  // Meta's count for Llama 3.1 8B
  // Q4_K: 144 bytes per 256 values; the norms are F32.
  const uint64_t norm_values = 4096ull * (1 + 2 * 32);
  EXPECT_EQ(bytes, (parameters - norm_values) / 256 * 144 + norm_values * 4);
  EXPECT_EQ(plan.tensors()[0].name, "token_embd.weight");
  EXPECT_EQ(plan.tensors()[0].shape, (std::vector<uint64_t>{4096, 128256}));
  EXPECT_EQ(plan.tensors().back().name, "blk.31.ffn_down.weight");
  EXPECT_EQ(plan.tensors().back().shape, (std::vector<uint64_t>{14336, 4096}));
}

TEST_F(SyntheticModel, BadNamesAreErrorsThatNameThem) {
  const std::string path = (dir_ / "bad.gguf").string();
  SyntheticModelOptions options = tiny();
  options.geometry = "llama-9000";
  EXPECT_NE(error_of([&] { write_synthetic_model(path, options); }).find("'llama-9000'"),
            std::string::npos);
  options = tiny();
  options.type = "Q9_9";
  EXPECT_NE(error_of([&] { write_synthetic_model(path, options); }).find("'Q9_9'"),
            std::string::npos);
  options = tiny();
  options.expert_type = "Q5_K";  // a real type, but not one the generator writes
  const std::string message = error_of([&] { write_synthetic_model(path, options); });
  EXPECT_NE(message.find("'Q5_K'"), std::string::npos) << message;
  EXPECT_NE(message.find("Q4_K"), std::string::npos) << message;  // lists what is supported
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(dir_));
}

}  // namespace
}  // namespace sluice
