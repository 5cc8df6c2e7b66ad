// write_synthetic_model: a geometry becomes its architecture's tensor list (names, shapes,
// types) and metadata through that architecture's planner (synthetic_plan.h), plus a
// vocabulary; random contents then stream through the GGUF writer one piece at a time, the next
// piece made on a second thread while the current one is written, so a 17 GB file is written at
// disk speed in bounded memory.
#include "sluice/synthetic_model.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <future>

#include "core/error.h"
#include "format/gguf/gguf_writer.h"
#include "store/synthetic_geometry.h"
#include "store/synthetic_plan.h"
#include "store/synthetic_vocab.h"
#include "store/synthetic_weights.h"

namespace sluice {
namespace {

// Values per piece: a multiple of every block size. 2.25 MiB of Q4_K: large enough that a
// thread per piece costs nothing, small enough that two pieces in memory are nothing either.
// Part of the format of the output: the seeds are per piece, so changing it changes the bytes.
constexpr uint64_t kPieceElements = uint64_t{1} << 22;

constexpr uint32_t kMaxLayers = 4096;

QType parse_type(const std::string& text, const char* what) {
  const auto type = qtype_from_name(text);
  if (!type || !synthetic_type_supported(*type)) {
    fail("synth: ", what, " '", text, "' is not supported (supported: ", synthetic_type_names(),
         ")");
  }
  return *type;
}

void add_metadata(GgufWriter& writer, const SyntheticGeometry& g, ArchKeys& keys, uint64_t seed) {
  const std::string arch(g.architecture);
  writer.add_metadata("general.architecture", MetaValue::string(arch));
  writer.add_metadata("general.type", MetaValue::string("model"));
  writer.add_metadata("general.name", MetaValue::string(std::string(g.display_name)));
  writer.add_metadata("general.description",
                      MetaValue::string("Random weights from sluice synth (geometry " +
                                        std::string(g.name) + ", seed " + std::to_string(seed) +
                                        "): the layout is real, the outputs mean nothing."));
  writer.add_metadata("general.quantization_version", MetaValue::scalar(uint32_t{2}));
  for (auto& [key, value] : keys.entries()) writer.add_metadata(key, std::move(value));

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
    if (tensor.spread.kind == WeightSpread::Kind::expert_ids) {
      // Rows may straddle pieces: the table's rows are seeded by the tensor, not the piece.
      fill_expert_ids(piece_seed(seed, tensor.name, 0), tensor.spread.n_expert, tensor.spread.row,
                      first, reinterpret_cast<int32_t*>(out.data()), count);
      return;
    }
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

  TensorPlan plan;
  ArchKeys keys(g.architecture);
  synthetic_planner(g.architecture)({g, layers, {type, expert_type}}, plan, keys);
  const std::vector<PlannedTensor>& tensors = plan.tensors();
  GgufWriter writer;
  add_metadata(writer, g, keys, options.seed);
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
