// dump_tensor_f32: streams one tensor through the reference dequantizer to little-endian
// float32, a bounded chunk at a time, to a file (atomically) or stdout. Knows no architecture.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "format/model_file.h"
#include "format/model_file_open.h"
#include "io/output_file.h"
#include "quant/dequantize.h"
#include "sluice/model_file_info.h"

namespace sluice {
namespace {

// A multiple of every block size (1, 32, 256), so a chunk never splits a block; a tensor's
// storage is contiguous, so chunks may cross rows.
constexpr uint64_t kChunkElements = 64 * 1024;

template <class Sink>
void stream_f32(const ModelFile& model, const TensorInfo& tensor, Sink&& sink) {
  const auto& traits = traits_of(tensor.type);
  const std::span<const uint8_t> bytes = model.tensor_bytes(tensor);
  // Block structs want 2- or 4-byte alignment; safetensors data may start at any byte, so each
  // chunk is copied into an 8-byte-aligned buffer first.
  std::vector<uint64_t> aligned(*row_bytes(tensor.type, kChunkElements) / 8 + 1);  // [chunk bytes]
  std::vector<float> values(kChunkElements);  // [chunk elements]
  for (uint64_t done = 0; done < tensor.n_elements; done += kChunkElements) {
    const uint64_t count = std::min(kChunkElements, tensor.n_elements - done);
    const uint64_t offset = done / traits.block_size * traits.block_bytes;
    const uint64_t length = *row_bytes(tensor.type, count);
    std::memcpy(aligned.data(), bytes.data() + offset, length);
    dequantize_row(tensor.type, aligned.data(), values.data(), static_cast<int64_t>(count));
    sink(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(values.data()),
                                  count * sizeof(float)));
  }
}

}  // namespace

void dump_tensor_f32(const std::string& path, const std::string& tensor_name,
                     const std::string& out_path_or_empty_for_stdout) {
  const ModelFile model = read_model_file(path);
  const TensorInfo& tensor = model.tensor(tensor_name);
  if (out_path_or_empty_for_stdout.empty()) {
    stream_f32(model, tensor,
               [](std::span<const uint8_t> chunk) { write_all(STDOUT_FILENO, chunk, "stdout"); });
    return;
  }
  OutputFile out(out_path_or_empty_for_stdout);
  stream_f32(model, tensor, [&](std::span<const uint8_t> chunk) { out.write(chunk); });
  out.commit();
}

}  // namespace sluice
