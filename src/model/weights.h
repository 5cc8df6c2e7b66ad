// WeightBinder: hands an architecture the resident tensors it names, checking each against the
// shape and kind it expects (a matrix needs a type with a CPU dot product; a vector is read into
// float32), and at the end refuses tensors nobody asked for, so a file of another variant is
// caught at load instead of computing garbage. Knows tensor names only as strings it is given.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "experts/expert_layout.h"
#include "format/model_file.h"

namespace sluice::model {

class WeightBinder {
 public:
  explicit WeightBinder(const ModelFile& file);

  // A [n_cols, n_rows] (GGUF order: n_cols fastest) weight matrix, viewed in place.
  MatrixView matrix(const std::string& name, int64_t n_cols, int64_t n_rows);
  std::optional<MatrixView> optional_matrix(const std::string& name, int64_t n_cols,
                                            int64_t n_rows);
  // A [n_cols, n_rows, n_matrix] stack of resident matrices (MLA's per-head attn_k_b and
  // attn_v_b), each viewed in place.
  std::vector<MatrixView> matrix_stack(const std::string& name, int64_t n_cols, int64_t n_rows,
                                       int64_t n_matrix);
  // A 1-D tensor of n elements, converted to float32.
  std::vector<float> vector(const std::string& name, int64_t n);
  std::optional<std::vector<float>> optional_vector(const std::string& name, int64_t n);
  // A floating-point tensor of exactly `shape` (GGUF order, trailing 1s included), whole, in
  // float32: a convolution kernel stored [d_conv, 1, channels, 1], a [1, n_head, 1, 1] vector.
  std::vector<float> floats(const std::string& name, std::initializer_list<int64_t> shape);

  // A [n_cols, n_rows, n_expert] stack of routed-expert matrices, or the same given as one
  // [n_cols, n_rows] tensor per expert ("blk.N.ffn_gate_exps.weight" → "blk.N.ffn_gate.E.weight")
  // in one file. Only its place on disk is returned: its bytes are not touched here, since
  // routed experts may stream.
  experts::ExpertTensor expert_matrices(const std::string& name, int64_t n_cols, int64_t n_rows,
                                        int64_t n_expert);
  // Every file a tensor may live in, for an ExpertLayout.
  std::vector<std::shared_ptr<File>> files() const;

  bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }
  // Marks tensors the architecture knowingly ignores (e.g. rope_freqs it recomputes).
  void ignore(const std::string& name);
  // Marks every tensor blk.<N>.* with N >= first_layer ignored: the NextN / multi-token
  // prediction layers some files carry after the decoder's, which the forward does not run.
  void ignore_layers_from(int64_t first_layer);
  // Refuses the file when any tensor was neither bound nor ignored, naming up to 5 of them.
  void check_all_bound() const;

 private:
  const TensorInfo& require(const std::string& name, std::initializer_list<int64_t> shape);
  void require_matrix_kernel(const TensorInfo& info) const;  // refuses a type without a dot
  experts::ExpertTensor per_expert_matrices(const std::string& name, const std::string& stem,
                                            int64_t n_cols, int64_t n_rows, int64_t n_expert);

  const ModelFile& file_;
  std::set<std::string> bound_;
};

std::string layer_tensor(int64_t layer, const char* suffix);  // "blk.<layer>.<suffix>"

}  // namespace sluice::model
