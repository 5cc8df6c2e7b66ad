// ActivationDump: collects tensors in memory during the eval, then writes NumPy .npy files.
#include "cli/activation_dump.h"

#include <cstdio>
#include <filesystem>

#include "sluice/error.h"

namespace sluice::cli {
namespace {

// NumPy format 1.0: magic, version, header length, a dict padded with spaces to a multiple of
// 64 bytes (ending in a newline), then the raw little-endian float32 data.
std::string npy_header(int64_t rows, int64_t cols) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) +
                     ", " + std::to_string(cols) + "), }";
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string header = "\x93NUMPY";
  header += char(1);
  header += char(0);
  header += char(dict.size() & 0xff);
  header += char(dict.size() >> 8);
  return header + dict;
}

}  // namespace

ActivationDump::ActivationDump(std::string dir) : dir_(std::move(dir)) {}

void ActivationDump::add(std::string_view name, int64_t layer, const float* data, int64_t n_tokens,
                         int64_t row) {
  const std::string key =
      std::string(name) + "-" + (layer < 0 ? std::string("out") : std::to_string(layer));
  Tensor& tensor = tensors_[key];
  tensor.row = row;
  tensor.values.insert(tensor.values.end(), data, data + n_tokens * row);
}

void ActivationDump::write() const {
  std::error_code error;
  std::filesystem::create_directories(dir_, error);
  if (error) throw Error("cannot create '" + dir_ + "': " + error.message());
  for (const auto& [key, tensor] : tensors_) {
    const std::string path = dir_ + "/" + key + ".npy";
    const std::string tmp = path + ".tmp";
    FILE* file = std::fopen(tmp.c_str(), "wb");
    if (file == nullptr) throw Error("cannot write '" + tmp + "'");
    const int64_t rows = tensor.row > 0 ? int64_t(tensor.values.size()) / tensor.row : 0;
    const std::string header = npy_header(rows, tensor.row);
    const bool ok = std::fwrite(header.data(), 1, header.size(), file) == header.size() &&
                    std::fwrite(tensor.values.data(), sizeof(float), tensor.values.size(), file) ==
                        tensor.values.size();
    if (std::fclose(file) != 0 || !ok) {
      std::remove(tmp.c_str());
      throw Error("cannot write '" + path + "'");
    }
    std::filesystem::rename(tmp, path);
  }
}

}  // namespace sluice::cli
