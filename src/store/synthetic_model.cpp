// write_synthetic_model: a geometry becomes llama.cpp's qwen3moe tensor list (names, shapes,
// types), its metadata and vocabulary; random contents then stream through the GGUF writer one
// piece at a time, the next piece made on a second thread while the current one is written, so
// a 17 GB file is written at disk speed in bounded memory.
#include "sluice/synthetic_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <future>

#include "core/error.h"
#include "format/gguf/gguf_writer.h"
#include "store/synthetic_geometry.h"
#include "store/synthetic_vocab.h"
#include "store/synthetic_weights.h"

namespace sluice {
namespace {

// Values per piece: a multiple of every block size. 2.25 MiB of Q4_K: large enough that a
// thread per piece costs nothing, small enough that two pieces in memory are nothing either.
// Part of the format of the output: the seeds are per piece, so changing it changes the bytes.
constexpr uint64_t kPieceElements = uint64_t{1} << 22;

constexpr uint32_t kMaxLayers = 4096;

struct PlannedTensor {
  std::string name;
  QType type = QType::F32;
  std::vector<uint64_t> shape;
  WeightSpread spread;
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
};

QType parse_type(const std::string& text, const char* what) {
  const auto type = qtype_from_name(text);
  if (!type || !synthetic_type_supported(*type)) {
    fail("synth: ", what, " '", text, "' is not supported (supported: ", synthetic_type_names(),
         ")");
  }
  return *type;
}

class TensorPlan {
 public:
  // A weight matrix; values with rms 1/sqrt(row length) keep each product's output near the
  // scale of its input, so activations stay well-behaved through every layer.
  void matrix(std::string name, QType type, std::vector<uint64_t> shape, float gain = 1.0f) {
    const float rms = gain / std::sqrt(float(shape[0]));
    add(std::move(name), type, std::move(shape), {WeightSpread::Kind::matrix, rms});
  }
  // An RMSNorm weight: 1 ± 0.1, always F32 as in real files.
  void norm(std::string name, uint64_t n) {
    add(std::move(name), QType::F32, {n}, {WeightSpread::Kind::norm, 0.1f});
  }
  // Like matrix, but the rms is given (token embeddings).
  void table(std::string name, QType type, std::vector<uint64_t> shape, float rms) {
    add(std::move(name), type, std::move(shape), {WeightSpread::Kind::matrix, rms});
  }

  std::vector<PlannedTensor>& tensors() { return tensors_; }

 private:
  void add(std::string name, QType type, std::vector<uint64_t> shape, WeightSpread spread) {
    const auto& traits = traits_of(type);
    if (shape[0] % traits.block_size != 0) {
      fail("synth: ", name, " has rows of ", shape[0], " values, not a multiple of the ",
           traits.block_size, "-value blocks of ", traits.name, "; choose another type");
    }
    uint64_t n_elements = 1;
    for (uint64_t dim : shape) n_elements *= dim;
    const uint64_t n_bytes = n_elements / traits.block_size * traits.block_bytes;
    tensors_.push_back({std::move(name), type, std::move(shape), spread, n_elements, n_bytes});
  }

  std::vector<PlannedTensor> tensors_;
};

// llama.cpp's LLM_ARCH_QWEN3MOE tensors, shapes first dimension fastest.
std::vector<PlannedTensor> plan_qwen3moe(const SyntheticGeometry& g, uint32_t layers, QType type,
                                         QType expert_type) {
  const uint64_t embd = g.n_embd, vocab = g.n_vocab, q = uint64_t{g.n_head} * g.head_dim,
                 kv = uint64_t{g.n_head_kv} * g.head_dim, ff = g.n_ff_exp, experts = g.n_expert;
  TensorPlan plan;
  // Embedding rows enter an RMSNorm directly; rms 1 puts them on the scale the layers add to the
  // residual stream, so the input token still shows in the last layer.
  plan.table("token_embd.weight", type, {embd, vocab}, 1.0f);
  plan.norm("output_norm.weight", embd);
  plan.matrix("output.weight", type, {embd, vocab});
  for (uint32_t layer = 0; layer < layers; ++layer) {
    const std::string blk = "blk." + std::to_string(layer) + ".";
    plan.norm(blk + "attn_norm.weight", embd);
    plan.matrix(blk + "attn_q.weight", type, {embd, q});
    plan.matrix(blk + "attn_k.weight", type, {embd, kv});
    plan.matrix(blk + "attn_v.weight", type, {embd, kv});
    plan.matrix(blk + "attn_output.weight", type, {q, embd});
    plan.norm(blk + "attn_q_norm.weight", g.head_dim);
    plan.norm(blk + "attn_k_norm.weight", g.head_dim);
    plan.norm(blk + "ffn_norm.weight", embd);
    // Router logits of spread ~3 make routing decisive, as trained routers are.
    plan.matrix(blk + "ffn_gate_inp.weight", QType::F32, {embd, experts}, 3.0f);
    plan.matrix(blk + "ffn_gate_exps.weight", expert_type, {embd, ff, experts});
    plan.matrix(blk + "ffn_up_exps.weight", expert_type, {embd, ff, experts});
    plan.matrix(blk + "ffn_down_exps.weight", expert_type, {ff, embd, experts});
  }
  return std::move(plan.tensors());
}

void add_metadata(GgufWriter& writer, const SyntheticGeometry& g, uint32_t layers, uint64_t seed) {
  const std::string arch(g.architecture);
  auto u32 = [&](const char* key, uint32_t value) {
    writer.add_metadata(arch + "." + key, MetaValue::scalar(value));
  };
  auto f32 = [&](const char* key, float value) {
    writer.add_metadata(arch + "." + key, MetaValue::scalar(value));
  };
  writer.add_metadata("general.architecture", MetaValue::string(arch));
  writer.add_metadata("general.type", MetaValue::string("model"));
  writer.add_metadata("general.name", MetaValue::string(std::string(g.display_name)));
  writer.add_metadata("general.description",
                      MetaValue::string("Random weights from sluice synth (geometry " +
                                        std::string(g.name) + ", seed " + std::to_string(seed) +
                                        "): the layout is real, the outputs mean nothing."));
  writer.add_metadata("general.quantization_version", MetaValue::scalar(uint32_t{2}));
  u32("block_count", layers);
  u32("context_length", g.n_ctx);
  u32("embedding_length", g.n_embd);
  u32("feed_forward_length", g.n_ff);
  u32("attention.head_count", g.n_head);
  u32("attention.head_count_kv", g.n_head_kv);
  u32("attention.key_length", g.head_dim);
  u32("attention.value_length", g.head_dim);
  f32("rope.freq_base", g.rope_freq_base);
  f32("attention.layer_norm_rms_epsilon", g.rms_eps);
  u32("expert_count", g.n_expert);
  u32("expert_used_count", g.n_expert_used);
  u32("expert_feed_forward_length", g.n_ff_exp);

  SyntheticVocab vocab = make_synthetic_vocab(g.n_vocab);
  writer.add_metadata("tokenizer.ggml.model", MetaValue::string("gpt2"));
  writer.add_metadata("tokenizer.ggml.pre", MetaValue::string("qwen2"));
  writer.add_metadata("tokenizer.ggml.tokens", MetaValue::string_array(std::move(vocab.tokens)));
  writer.add_metadata("tokenizer.ggml.token_type", MetaValue::array(vocab.types));
  writer.add_metadata("tokenizer.ggml.merges", MetaValue::string_array(std::move(vocab.merges)));
  writer.add_metadata("tokenizer.ggml.bos_token_id", MetaValue::scalar(vocab.bos));
  writer.add_metadata("tokenizer.ggml.eos_token_id", MetaValue::scalar(vocab.eos));
  writer.add_metadata("tokenizer.ggml.padding_token_id", MetaValue::scalar(vocab.pad));
  writer.add_metadata("tokenizer.ggml.add_bos_token", MetaValue::scalar(false));
  writer.add_metadata("tokenizer.chat_template", MetaValue::string(vocab.chat_template));
}

// Streams one tensor: piece i + 1 is filled on another thread while piece i is written. Each
// piece has its own seed, so the bytes do not depend on the threading.
void produce(const PlannedTensor& tensor, uint64_t seed, const GgufWriter::Emit& emit,
             const std::function<void(uint64_t)>& written) {
  const auto& traits = traits_of(tensor.type);
  const uint64_t n_pieces = (tensor.n_elements + kPieceElements - 1) / kPieceElements;
  auto make = [&tensor, &traits, seed](uint64_t piece, std::vector<uint8_t>& out) {
    const uint64_t first = piece * kPieceElements;
    const uint64_t count = std::min(kPieceElements, tensor.n_elements - first);
    out.resize(count / traits.block_size * traits.block_bytes);
    fill_random_weights(tensor.type, tensor.spread, piece_seed(seed, tensor.name, piece),
                        out.data(), count);
  };
  std::vector<uint8_t> current;  // [piece bytes]
  std::vector<uint8_t> next;     // [piece bytes] being filled ahead
  make(0, current);
  for (uint64_t piece = 0; piece < n_pieces; ++piece) {
    std::future<void> ahead;  // joined before `next` is touched or destroyed
    if (piece + 1 < n_pieces) {
      ahead = std::async(std::launch::async, make, piece + 1, std::ref(next));
    }
    emit(current);
    written(current.size());
    if (ahead.valid()) ahead.get();
    std::swap(current, next);
  }
}

}  // namespace

std::vector<std::string> synthetic_geometry_names() {
  std::vector<std::string> names;
  for (const auto& geometry : synthetic_geometries()) names.emplace_back(geometry.name);
  return names;
}

SyntheticModelSummary write_synthetic_model(const std::string& path,
                                            const SyntheticModelOptions& options,
                                            const SyntheticProgress& progress) {
  const SyntheticGeometry& g = find_synthetic_geometry(options.geometry);
  const QType type = options.type.empty() ? g.type : parse_type(options.type, "type");
  QType expert_type = options.type.empty() ? g.expert_type : type;
  if (!options.expert_type.empty()) expert_type = parse_type(options.expert_type, "expert type");
  const uint32_t layers = options.layers == 0 ? g.n_layer : options.layers;
  if (layers > kMaxLayers) fail("synth: ", layers, " layers is more than ", kMaxLayers);

  const std::vector<PlannedTensor> tensors = plan_qwen3moe(g, layers, type, expert_type);
  GgufWriter writer;
  add_metadata(writer, g, layers, options.seed);
  SyntheticModelSummary summary;
  for (const auto& tensor : tensors) summary.tensor_bytes += tensor.n_bytes;
  uint64_t done = 0;
  auto written = [&](uint64_t bytes) {
    done += bytes;
    if (progress) progress(done, summary.tensor_bytes);
  };
  for (const auto& tensor : tensors) {
    writer.add_tensor(tensor.name, tensor.type, tensor.shape,
                      [&tensor, &written, seed = options.seed](const GgufWriter::Emit& emit) {
                        produce(tensor, seed, emit, written);
                      });
  }
  writer.write(path);

  summary.path = path;
  summary.architecture = std::string(g.architecture);
  summary.type = std::string(qtype_name(type));
  summary.expert_type = std::string(qtype_name(expert_type));
  summary.layers = layers;
  summary.tensors = tensors.size();
  summary.file_bytes = std::filesystem::file_size(path);
  return summary;
}

}  // namespace sluice
