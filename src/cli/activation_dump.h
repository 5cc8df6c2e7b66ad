// --dump-activations DIR: every named intermediate tensor of an eval, written as
// DIR/<name>-<layer>.npy (float32, shape [n_tokens, row]; layer -1 is written as "out"), so a
// tool can compare them with llama.cpp's eval-callback tensors and find the first divergence.
// Later chunks of the same tensor are appended as more rows.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::cli {

class ActivationDump {
 public:
  explicit ActivationDump(std::string dir);
  void add(std::string_view name, int64_t layer, const float* data, int64_t n_tokens, int64_t row);
  void write() const;  // each file through a temporary name + rename

 private:
  struct Tensor {
    int64_t row = 0;
    std::vector<float> values;
  };
  std::string dir_;
  std::map<std::string, Tensor> tensors_;
};

}  // namespace sluice::cli
