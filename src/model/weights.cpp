// WeightBinder's checks. Messages name the file, the tensor and what was expected.
#include "model/weights.h"

#include <algorithm>
#include <charconv>

#include "backend/cpu/vec_dot.h"
#include "core/error.h"
#include "quant/dequantize.h"

namespace sluice::model {
namespace {

std::string shape_text(std::span<const uint64_t> shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string shape_text(std::initializer_list<int64_t> shape) {
  std::string text = "[";
  size_t i = 0;
  for (int64_t d : shape) text += (i++ ? ", " : "") + std::to_string(d);
  return text + "]";
}

}  // namespace

std::string layer_tensor(int64_t layer, const char* suffix) {
  return "blk." + std::to_string(layer) + "." + suffix;
}

WeightBinder::WeightBinder(const ModelFile& file) : file_(file) {}

void WeightBinder::require_matrix_kernel(const TensorInfo& info) const {
  if (cpu::vec_dot_kernel(info.type).fn == nullptr) {
    fail(file_.format_name(), ": ", file_.display_name(), ": tensor '", info.name, "' has type ",
         qtype_name(info.type), ", which has no matrix kernel");
  }
}

const TensorInfo& WeightBinder::require(const std::string& name,
                                        std::initializer_list<int64_t> shape) {
  const TensorInfo* info = file_.find_tensor(name);
  if (info == nullptr) {
    fail(file_.format_name(), ": ", file_.display_name(), ": missing tensor '", name,
         "' (expected shape ", shape_text(shape), ")");
  }
  bool same = info->n_dims == shape.size();
  size_t i = 0;
  for (int64_t d : shape) same = same && int64_t(info->ne[i++]) == d;
  // A trailing dimension of 1 is the same shape (GGUF writers differ on [n] vs [n, 1]).
  if (!same && shape.size() == 2 && info->n_dims == 1 && *(shape.begin() + 1) == 1) {
    same = int64_t(info->ne[0]) == *shape.begin();
  }
  if (!same) {
    fail(file_.format_name(), ": ", file_.display_name(), ": tensor '", name, "' has shape ",
         shape_text(info->shape()), ", expected ", shape_text(shape));
  }
  bound_.insert(name);
  return *info;
}

MatrixView WeightBinder::matrix(const std::string& name, int64_t n_cols, int64_t n_rows) {
  const TensorInfo& info = require(name, {n_cols, n_rows});
  require_matrix_kernel(info);
  return MatrixView{info.type, file_.tensor_bytes(info).data(), n_cols, n_rows};
}

std::vector<MatrixView> WeightBinder::matrix_stack(const std::string& name, int64_t n_cols,
                                                   int64_t n_rows, int64_t n_matrix) {
  const TensorInfo& info = require(name, {n_cols, n_rows, n_matrix});
  require_matrix_kernel(info);
  const auto* bytes = file_.tensor_bytes(info).data();
  const uint64_t matrix_bytes = *row_bytes(info.type, uint64_t(n_cols)) * uint64_t(n_rows);
  std::vector<MatrixView> views;
  for (int64_t i = 0; i < n_matrix; ++i) {
    views.push_back(MatrixView{info.type, bytes + uint64_t(i) * matrix_bytes, n_cols, n_rows});
  }
  return views;
}

experts::ExpertTensor WeightBinder::expert_matrices(const std::string& name, int64_t n_cols,
                                                    int64_t n_rows, int64_t n_expert) {
  if (!has(name) && name.ends_with("_exps.weight")) {
    const std::string stem = name.substr(0, name.size() - 12);  // "blk.N.ffn_gate"
    if (has(stem + ".0.weight")) return per_expert_matrices(name, stem, n_cols, n_rows, n_expert);
  }
  const TensorInfo& info = require(name, {n_cols, n_rows, n_expert});
  require_matrix_kernel(info);
  experts::ExpertTensor tensor;
  tensor.name = name;
  tensor.type = info.type;
  tensor.n_cols = n_cols;
  tensor.n_rows = n_rows;
  tensor.file_index = info.file_index;
  tensor.offset = info.offset;
  tensor.expert_bytes = info.n_bytes / uint64_t(n_expert);
  tensor.expert_stride = tensor.expert_bytes;
  return tensor;
}

// The stack given as one 2-D tensor per expert, "blk.N.ffn_gate.E.weight" (old llama.cpp Mixtral
// files; Hugging Face snapshots, per expert or fused, as model/hf_snapshot.cpp names them). Evenly
// spaced experts in one file keep the stack's offset + e * stride; others (a Hub snapshot's name
// order puts expert 10 after 1; a layer straddling two shards) get tables of offsets and files.
// One type per stack, as the expert kernels assume.
experts::ExpertTensor WeightBinder::per_expert_matrices(const std::string& name,
                                                        const std::string& stem, int64_t n_cols,
                                                        int64_t n_rows, int64_t n_expert) {
  experts::ExpertTensor tensor;
  std::vector<uint64_t> offsets;
  std::vector<uint32_t> files;
  for (int64_t e = 0; e < n_expert; ++e) {
    const std::string piece = stem + "." + std::to_string(e) + ".weight";
    if (!has(piece)) {
      fail(file_.format_name(), ": ", file_.display_name(), ": missing tensor '", piece,
           "' (expert ", e, " of ", n_expert, " for '", name, "')");
    }
    const TensorInfo& info = require(piece, {n_cols, n_rows});
    if (e == 0) {
      require_matrix_kernel(info);
      tensor.name = name;
      tensor.type = info.type;
      tensor.n_cols = n_cols;
      tensor.n_rows = n_rows;
      tensor.file_index = info.file_index;
      tensor.offset = info.offset;
      tensor.expert_bytes = info.n_bytes;
    } else if (info.type != tensor.type || info.n_bytes != tensor.expert_bytes) {
      fail(file_.format_name(), ": ", file_.display_name(), ": the experts of '", name,
           "' do not all have one type (at '", piece, "': ", qtype_name(info.type), ")");
    }
    offsets.push_back(info.offset);
    files.push_back(info.file_index);
  }
  tensor.expert_stride = n_expert == 1             ? tensor.expert_bytes
                         : offsets[1] > offsets[0] ? offsets[1] - offsets[0]
                                                   : 0;
  bool even = tensor.expert_stride >= tensor.expert_bytes &&
              std::all_of(files.begin(), files.end(), [&](uint32_t f) { return f == files[0]; });
  for (int64_t e = 0; e < n_expert && even; ++e) {
    even = offsets[size_t(e)] == tensor.offset_of(int32_t(e));
  }
  if (!even) {
    tensor.expert_stride = 0;
    tensor.expert_offsets = std::move(offsets);
    tensor.expert_files = std::move(files);
  }
  return tensor;
}

std::vector<std::shared_ptr<File>> WeightBinder::files() const {
  std::vector<std::shared_ptr<File>> files;
  for (const SourceFile& source : file_.sources()) files.push_back(source.file);
  return files;
}

std::optional<MatrixView> WeightBinder::optional_matrix(const std::string& name, int64_t n_cols,
                                                        int64_t n_rows) {
  if (!has(name)) return std::nullopt;
  return matrix(name, n_cols, n_rows);
}

std::vector<float> WeightBinder::vector(const std::string& name, int64_t n) {
  const TensorInfo& info = require(name, {n});
  if (!traits_of(info.type).is_float) {
    fail(file_.format_name(), ": ", file_.display_name(), ": tensor '", name, "' has type ",
         qtype_name(info.type), ", expected a floating-point vector");
  }
  std::vector<float> values(static_cast<size_t>(n));
  dequantize_row(info.type, file_.tensor_bytes(info).data(), values.data(), n);
  return values;
}

std::vector<float> WeightBinder::floats(const std::string& name,
                                        std::initializer_list<int64_t> shape) {
  const TensorInfo& info = require(name, shape);
  if (!traits_of(info.type).is_float) {
    fail(file_.format_name(), ": ", file_.display_name(), ": tensor '", name, "' has type ",
         qtype_name(info.type), ", expected floating point");
  }
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> values(static_cast<size_t>(n));
  dequantize_row(info.type, file_.tensor_bytes(info).data(), values.data(), n);
  return values;
}

std::optional<std::vector<float>> WeightBinder::optional_vector(const std::string& name,
                                                                int64_t n) {
  if (!has(name)) return std::nullopt;
  return vector(name, n);
}

void WeightBinder::ignore(const std::string& name) {
  if (has(name)) bound_.insert(name);
}

void WeightBinder::ignore_layers_from(int64_t first_layer) {
  for (const TensorInfo& info : file_.tensors()) {
    if (info.name.rfind("blk.", 0) != 0) continue;
    const char* digits = info.name.data() + 4;
    const char* end = info.name.data() + info.name.size();
    int64_t layer = 0;
    const auto [stop, error] = std::from_chars(digits, end, layer);
    if (error == std::errc() && stop != digits && stop != end && *stop == '.' &&
        layer >= first_layer) {
      bound_.insert(info.name);
    }
  }
}

void WeightBinder::check_all_bound() const {
  std::string extra;
  int count = 0;
  for (const TensorInfo& info : file_.tensors()) {
    if (bound_.count(info.name)) continue;
    if (count < 5) extra += (count ? ", '" : "'") + info.name + "'";
    ++count;
  }
  if (count > 0) {
    fail(file_.format_name(), ": ", file_.display_name(), ": ", count,
         " unexpected tensor(s) for this architecture: ", extra, count > 5 ? ", …" : "");
  }
}

}  // namespace sluice::model
