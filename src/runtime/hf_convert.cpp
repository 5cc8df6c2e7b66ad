// convert_hf_snapshot: carries out a convert::Plan — picks each tensor's type as llama.cpp does
// (norms, biases and routers F32; the requested type where the row length allows it, else
// llama-quantize's fallback), then streams rows from the snapshot's mapping through the
// reference quantizers into the GGUF writer, a bounded chunk at a time so models larger than
// memory convert. Knows no family: the plan says which rows make which tensor.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <thread>

#include "core/error.h"
#include "core/thread_pool.h"
#include "format/gguf/gguf_writer.h"
#include "format/model_file_open.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"
#include "runtime/hf_convert_fp8.h"
#include "runtime/hf_convert_gpt_oss.h"
#include "runtime/hf_convert_plan.h"
#include "sluice/convert.h"

namespace sluice {
namespace {

using convert::Plan;
using convert::PlannedTensor;
using convert::TensorRole;

constexpr QType kAllowed[] = {QType::F32,  QType::F16,  QType::BF16, QType::Q8_0, QType::Q4_0,
                              QType::Q4_K, QType::Q5_K, QType::Q6_K, QType::MXFP4};

QType parse_type(const std::string& name, const char* option) {
  const std::optional<QType> type = qtype_from_name(name);
  if (type && std::find(std::begin(kAllowed), std::end(kAllowed), *type) != std::end(kAllowed)) {
    return *type;
  }
  fail("convert: ", option, " '", name,
       "' is not one of F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, MXFP4");
}

// llama.cpp's --outtype auto: BF16 when the first matrix is BF16, else F16.
QType guess_type(const Plan& plan) {
  for (const PlannedTensor& tensor : plan.tensors) {
    if (tensor.ne.size() >= 2 && !tensor.rows.empty()) {
      return tensor.rows.front().tensor.type == QType::BF16 ? QType::BF16 : QType::F16;
    }
  }
  return QType::F16;
}

// The type one tensor is written in. Where the row length is not a whole number of blocks:
// llama-quantize's substitutes for the k-quants (Q4_K→Q5_0, Q5_K→Q5_1, Q6_K→Q8_0), then F16
// as convert_hf_to_gguf.py falls back for Q8_0 and Q4_0.
QType type_of(const PlannedTensor& tensor, QType type, QType expert_type) {
  if (tensor.role == TensorRole::kMxfp4Copy) return QType::MXFP4;
  if (tensor.role == TensorRole::kKeepF32 || tensor.ne.size() < 2) return QType::F32;
  QType chosen = tensor.role == TensorRole::kExperts ? expert_type : type;
  const uint64_t n = tensor.ne[0];
  if (n % traits_of(chosen).block_size == 0) return chosen;
  if (chosen == QType::Q4_K) chosen = QType::Q5_0;
  if (chosen == QType::Q5_K) chosen = QType::Q5_1;
  if (chosen == QType::Q6_K) chosen = QType::Q8_0;
  return n % traits_of(chosen).block_size == 0 ? chosen : QType::F16;
}

// general.file_type: llama.cpp's LlamaFileType of the requested type (a k-quant with nothing
// mixed in is the _S variant's number; MXFP4 experts are MOSTLY_MXFP4_MOE whatever the rest).
uint32_t file_type_of(QType type, QType expert_type) {
  if (expert_type == QType::MXFP4) return 38;
  switch (type) {
    case QType::F32:
      return 0;
    case QType::F16:
      return 1;
    case QType::Q4_0:
      return 2;
    case QType::Q8_0:
      return 7;
    case QType::Q4_K:
      return 14;
    case QType::Q5_K:
      return 16;
    case QType::Q6_K:
      return 18;
    case QType::BF16:
      return 32;
    default:
      return 0;
  }
}

// Writes one planned tensor's rows: read (source type → f32), apply llama.cpp's changes to the
// numbers, quantize (in parallel), emit; `chunk_rows` rows at a time.
class TensorProducer {
 public:
  TensorProducer(const ModelFile& snapshot, const PlannedTensor& tensor, QType type,
                 convert::Fp8BlockSize fp8_block, ThreadPool& pool,
                 std::function<void(uint64_t)> on_bytes)
      : snapshot_(snapshot),
        tensor_(tensor),
        fp8_block_(fp8_block),
        type_(type),
        pool_(pool),
        on_bytes_(std::move(on_bytes)) {}

  void operator()(const GgufWriter::Emit& emit) const {
    const uint64_t row_len = tensor_.ne[0];
    const uint64_t out_row_bytes = *row_bytes(type_, row_len);
    const uint64_t chunk_rows = std::max<uint64_t>(1, (uint64_t(16) << 20) / (row_len * 4));
    std::vector<float> floats;      // [chunk_rows, row_len]
    std::vector<uint8_t> out;       // [chunk_rows, out_row_bytes]
    if (!tensor_.values.empty()) {  // computed: one row of float32
      out.resize(tensor_.values.size() * sizeof(float));
      std::memcpy(out.data(), tensor_.values.data(), out.size());
      emit(out);
      on_bytes_(out.size());
      return;
    }
    for (const convert::RowRange& range : tensor_.rows) {
      if (range.mxfp4_scales) {
        emit_mxfp4_copy(range, chunk_rows, emit);
        continue;
      }
      const std::span<const uint8_t> bytes = snapshot_.tensor_bytes(range.tensor);
      const uint64_t source_len = range.tensor.ne[0];  // row_len unless columns are picked
      const uint64_t in_row_bytes = *row_bytes(range.tensor.type, source_len);
      const bool picks = range.column_step != 1 || range.first_column != 0;
      std::vector<float> whole_row(picks ? source_len : 0);
      std::vector<float> scales;  // an FP8 weight's block scales, whole
      if (range.scale) {
        scales.resize(range.scale->n_elements);
        dequantize_row(range.scale->type, snapshot_.tensor_bytes(*range.scale).data(),
                       scales.data(), int64_t(scales.size()));
      }
      if (range.transpose) {
        emit_transposed(range, bytes, scales, emit);
        continue;
      }
      for (uint64_t first = 0; first < range.n_rows; first += chunk_rows) {
        const uint64_t n = std::min(chunk_rows, range.n_rows - first);
        floats.resize(n * row_len);
        out.resize(n * out_row_bytes);
        for (uint64_t r = 0; r < n; ++r) {
          const uint64_t src_row =
              range.first_row + range.row_step * source_row(first + r, range.n_rows);
          float* row = picks ? whole_row.data() : floats.data() + r * row_len;
          dequantize_row(range.tensor.type, bytes.data() + src_row * in_row_bytes, row,
                         int64_t(source_len));
          if (range.scale) {
            convert::scale_fp8_row(scales.data(), int64_t(range.scale->ne[0]), fp8_block_,
                                   range.scale_row0 + src_row, row, int64_t(source_len));
          }
          for (uint64_t k = 0; picks && k < row_len; ++k) {
            floats[r * row_len + k] = row[range.first_column + k * range.column_step];
          }
        }
        finish_numbers(floats);
        pool_.parallel_for(0, int64_t(n), 8, [&](int64_t lo, int64_t hi) {
          for (int64_t r = lo; r < hi; ++r) {
            quantize_row(type_, floats.data() + r * int64_t(row_len),
                         out.data() + r * out_row_bytes, int64_t(row_len));
          }
        });
        emit(out);
        on_bytes_(out.size());
      }
    }
  }

 private:
  // A whole (small) 2-D tensor written transposed: its (picked) columns become the output rows.
  void emit_transposed(const convert::RowRange& range, std::span<const uint8_t> bytes,
                       const std::vector<float>& scales, const GgufWriter::Emit& emit) const {
    const uint64_t cols = range.tensor.ne[0], rows = range.tensor.n_rows();
    const uint64_t in_row_bytes = *row_bytes(range.tensor.type, cols);
    std::vector<float> source(rows * cols), floats(rows * cols);
    for (uint64_t r = 0; r < rows; ++r) {
      dequantize_row(range.tensor.type, bytes.data() + r * in_row_bytes, source.data() + r * cols,
                     int64_t(cols));
      if (range.scale) {
        convert::scale_fp8_row(scales.data(), int64_t(range.scale->ne[0]), fp8_block_,
                               range.scale_row0 + r, source.data() + r * cols, int64_t(cols));
      }
    }
    const uint64_t n_out = range.n_rows;
    for (uint64_t k = 0; k < n_out; ++k) {
      const uint64_t c = range.first_column + k * range.column_step;
      for (uint64_t r = 0; r < rows; ++r) floats[k * rows + r] = source[r * cols + c];
    }
    const uint64_t out_row_bytes = *row_bytes(type_, rows);
    std::vector<uint8_t> out(n_out * out_row_bytes);
    pool_.parallel_for(0, int64_t(n_out), 8, [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        quantize_row(type_, floats.data() + r * int64_t(rows), out.data() + r * out_row_bytes,
                     int64_t(rows));
      }
    });
    emit(out);
    on_bytes_(out.size());
  }

  // Hub MXFP4 rows (gpt-oss's experts) into GGUF MXFP4 blocks, byte for byte.
  void emit_mxfp4_copy(const convert::RowRange& range, uint64_t chunk_rows,
                       const GgufWriter::Emit& emit) const {
    const uint64_t n_blocks = tensor_.ne[0] / 32;
    const std::span<const uint8_t> values = snapshot_.tensor_bytes(range.tensor);
    const std::span<const uint8_t> exponents = snapshot_.tensor_bytes(*range.mxfp4_scales);
    const uint64_t out_row_bytes = *row_bytes(QType::MXFP4, tensor_.ne[0]);
    std::vector<uint8_t> out;
    for (uint64_t first = 0; first < range.n_rows; first += chunk_rows) {
      const uint64_t n = std::min(chunk_rows, range.n_rows - first);
      out.resize(n * out_row_bytes);
      for (uint64_t r = 0; r < n; ++r) {
        const uint64_t src_row = range.first_row + range.row_step * (first + r);
        convert::mxfp4_row_from_hub(values.data() + src_row * n_blocks * 16,
                                    exponents.data() + src_row * n_blocks, n_blocks,
                                    out.data() + r * out_row_bytes);
      }
      emit(out);
      on_bytes_(out.size());
    }
  }

  // llama.cpp's LlamaModel.permute: within each head, HF row t * half + j becomes row 2 j + t.
  uint64_t source_row(uint64_t row, uint64_t n_rows) const {
    if (tensor_.permute_heads == 0 || tensor_.ne.size() < 2) return row;
    const uint64_t head_dim = n_rows / tensor_.permute_heads, half = head_dim / 2;
    const uint64_t head = row / head_dim, i = row % head_dim;
    return head * head_dim + (i % 2) * half + i / 2;
  }

  void finish_numbers(std::vector<float>& floats) const {
    if (tensor_.add_one) {
      for (float& x : floats) x += 1.0f;
    }
    if (tensor_.permute_heads != 0 && tensor_.ne.size() == 1) {  // a 1-D Q/K bias
      std::vector<float> permuted(floats.size());
      const uint64_t head_dim = floats.size() / tensor_.permute_heads, half = head_dim / 2;
      for (uint64_t i = 0; i < floats.size(); ++i) {
        const uint64_t head = i / head_dim, j = i % head_dim;
        permuted[i] = floats[head * head_dim + (j % 2) * half + j / 2];
      }
      floats.swap(permuted);
    }
  }

  const ModelFile& snapshot_;
  const PlannedTensor& tensor_;
  convert::Fp8BlockSize fp8_block_;
  QType type_;
  ThreadPool& pool_;
  std::function<void(uint64_t)> on_bytes_;
};

void check_rows(const ModelFile& snapshot, const PlannedTensor& tensor) {
  if (!tensor.values.empty()) return;  // computed, not read
  uint64_t n_rows = 1;
  for (size_t d = 1; d < tensor.ne.size(); ++d) n_rows *= tensor.ne[d];
  uint64_t total = 0;
  for (const convert::RowRange& range : tensor.rows) {
    const TensorInfo& source = range.tensor;
    if (range.mxfp4_scales) {
      convert::check_mxfp4_rows(snapshot, tensor, range);
      total += range.n_rows;
      continue;
    }
    const bool plain =
        source.type == QType::F32 || source.type == QType::F16 || source.type == QType::BF16;
    if (!plain && !(source.type == QType::F8_E4M3 && range.scale)) {
      fail("safetensors: ", snapshot.display_name(), ": tensor '", source.name, "' is ",
           qtype_name(source.type), " (F32, F16, BF16 and block-scaled F8_E4M3 weights convert)");
    }
    // The columns used: all, or every column_step-th from first_column.
    const uint64_t picked =
        range.column_step == 0 || range.first_column >= source.ne[0]
            ? 0
            : (source.ne[0] - range.first_column + range.column_step - 1) / range.column_step;
    if (range.transpose) {
      if (source.n_dims != 2 || source.n_rows() != tensor.ne[0] || range.n_rows != picked) {
        fail("convert: ", tensor.name, ": '", source.name, "' does not transpose into its rows");
      }
      total += range.n_rows;
      continue;
    }
    if (picked != tensor.ne[0]) {
      fail("safetensors: ", snapshot.display_name(), ": tensor '", source.name, "' rows of ",
           source.ne[0], ", expected ", tensor.ne[0]);
    }
    if (range.n_rows != 0 &&
        range.first_row + (range.n_rows - 1) * range.row_step >= source.n_rows()) {
      fail("convert: ", tensor.name, ": rows past the end of '", source.name, "'");
    }
    total += range.n_rows;
  }
  if (total != n_rows)
    fail("convert: ", tensor.name, ": ", total, " rows planned, ", n_rows, " needed");
  if (tensor.permute_heads != 0) {
    const uint64_t units = tensor.ne.size() == 1 ? tensor.ne[0] : n_rows;
    if (units % (2 * tensor.permute_heads) != 0) {
      fail("convert: ", tensor.name, ": ", units, " rows do not split into ", tensor.permute_heads,
           " heads of an even size");
    }
  }
}

// general.name: the repository's name when the snapshot sits in the Hugging Face cache
// (…/models--org--name/snapshots/<commit>), else the directory's.
std::string model_name(const std::string& hf_dir) {
  std::filesystem::path dir = std::filesystem::path(hf_dir).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();
  const std::string repo = dir.parent_path().parent_path().filename().string();
  if (dir.parent_path().filename() == "snapshots" && repo.starts_with("models--")) {
    return repo.substr(repo.rfind("--") + 2);
  }
  return dir.filename().empty() ? "model" : dir.filename().string();
}

// gpt-oss's Hub experts are copied as MXFP4 blocks: another --expert-type cannot be honoured.
void refuse_requantizing_mxfp4(const Plan& plan, const std::string& expert_type) {
  if (expert_type.empty() || qtype_from_name(expert_type) == QType::MXFP4) return;
  for (const PlannedTensor& tensor : plan.tensors) {
    if (tensor.role != TensorRole::kMxfp4Copy) continue;
    fail("convert: --expert-type ", expert_type,
         ": this snapshot's experts are MXFP4 and are copied as they are, as llama.cpp's "
         "converter does (no requantizing)");
  }
}

}  // namespace

void convert_hf_snapshot(const std::string& hf_dir, const std::string& out_path,
                         const ConvertOptions& options,
                         const std::function<void(uint64_t, uint64_t)>& progress) {
  std::error_code error;
  if (!std::filesystem::is_directory(hf_dir, error)) {
    fail("convert: ", hf_dir, ": not a directory (expected a Hugging Face snapshot)");
  }
  // Checked before anything is read: a bad type should not cost a pass over the snapshot.
  const std::optional<QType> asked = options.type.empty()
                                         ? std::nullopt
                                         : std::optional<QType>(parse_type(options.type, "--type"));
  const std::optional<QType> asked_experts =
      options.expert_type.empty()
          ? std::nullopt
          : std::optional<QType>(parse_type(options.expert_type, "--expert-type"));
  const ModelFile snapshot = read_model_file(hf_dir);
  Plan plan = convert::plan_model(snapshot, hf_dir);
  convert::attach_fp8_scales(snapshot, hf_dir, plan);
  convert::add_vocabulary(hf_dir, plan);
  refuse_requantizing_mxfp4(plan, options.expert_type);
  const QType type = asked.value_or(guess_type(plan));
  const QType expert_type = asked_experts.value_or(type);

  GgufWriter writer;
  bool named = false;
  for (MetaEntry& entry : plan.metadata) {
    writer.add_metadata(entry.key, std::move(entry.value));
    if (named || entry.key != "general.architecture") continue;
    named = true;  // the general.* keys llama.cpp writes right after the architecture
    writer.add_metadata("general.name", MetaValue::string(model_name(hf_dir)));
    writer.add_metadata("general.file_type", MetaValue::scalar(file_type_of(type, expert_type)));
    writer.add_metadata("general.quantization_version", MetaValue::scalar(uint32_t(2)));
  }

  const unsigned n_threads = std::max(1u, std::min(std::thread::hardware_concurrency(), 64u));
  ThreadPool pool{static_cast<int>(n_threads)};
  uint64_t total = 0, done = 0;
  std::vector<std::pair<const PlannedTensor*, QType>> typed;
  for (const PlannedTensor& tensor : plan.tensors) {
    check_rows(snapshot, tensor);
    const QType t = type_of(tensor, type, expert_type);
    uint64_t n_rows = 1;
    for (size_t d = 1; d < tensor.ne.size(); ++d) n_rows *= tensor.ne[d];
    total += *row_bytes(t, tensor.ne[0]) * n_rows;
    typed.emplace_back(&tensor, t);
  }
  const auto on_bytes = [&](uint64_t n) {
    done += n;
    if (progress) progress(done, total);
  };
  for (const auto& [tensor, t] : typed) {
    writer.add_tensor(
        tensor->name, t, tensor->ne,
        GgufWriter::Producer(TensorProducer(snapshot, *tensor, t, plan.fp8_block, pool, on_bytes)));
  }
  writer.write(out_path);
}

}  // namespace sluice
