// FP8 block-scaled weights for convert: config, companion scales, and the scaling of rows.
#include "runtime/hf_convert_fp8.h"

#include <iterator>
#include <map>
#include <utility>

#include "core/error.h"
#include "format/hf/hf_config.h"

namespace sluice::convert {

std::optional<Fp8BlockSize> read_fp8_config(const std::string& hf_dir) {
  const HfConfig config = HfConfig::load(hf_dir);
  if (!config.contains("quantization_config")) return std::nullopt;
  const nlohmann::json& q = config.json().at("quantization_config");
  const auto where = [&] { return config.path() + ": quantization_config"; };
  if (!q.is_object()) fail("config: ", where(), " is not an object");
  const std::string method = q.value("quant_method", std::string());
  if (method != "fp8") {
    fail("config: ", where(), ".quant_method '", method,
         "' cannot be converted (only fp8 block-scaled checkpoints; dequantize others first)");
  }
  if (q.contains("fmt") && q.at("fmt") != "e4m3") {
    fail("config: ", where(), ".fmt must be \"e4m3\"");
  }
  Fp8BlockSize block;
  if (q.contains("weight_block_size")) {
    const nlohmann::json& size = q.at("weight_block_size");
    if (!size.is_array() || size.size() != 2 || !size[0].is_number_integer() ||
        !size[1].is_number_integer() || size[0].get<int64_t>() <= 0 ||
        size[1].get<int64_t>() <= 0) {
      fail("config: ", where(), ".weight_block_size must be two positive integers");
    }
    block = {size[0].get<int64_t>(), size[1].get<int64_t>()};
  }
  return block;
}

bool is_fp8_scale_name(std::string_view hf_name) {
  return hf_name.ends_with("weight_scale_inv");
}

void attach_fp8_scales(const ModelFile& snapshot, const std::string& hf_dir, Plan& plan) {
  // Planned ranges carry renamed copies of the snapshot's tensors, or row slices of them
  // (deepseek's kv_b_proj per head, a fused gate_up per expert): find the weight by place.
  std::map<std::pair<uint32_t, uint64_t>, const TensorInfo*> by_place;
  for (const TensorInfo& tensor : snapshot.tensors()) {
    if (tensor.type == QType::F8_E4M3) by_place[{tensor.file_index, tensor.offset}] = &tensor;
  }
  if (by_place.empty()) return;
  const std::optional<Fp8BlockSize> block = read_fp8_config(hf_dir);
  if (!block) {
    fail("convert: ", hf_dir, ": F8_E4M3 tensors but config.json has no fp8 quantization_config");
  }
  plan.fp8_block = *block;
  for (PlannedTensor& planned : plan.tensors) {
    for (RowRange& range : planned.rows) {
      if (range.tensor.type != QType::F8_E4M3) continue;
      auto found = by_place.upper_bound({range.tensor.file_index, range.tensor.offset});
      const TensorInfo* weight = found == by_place.begin() ? nullptr : std::prev(found)->second;
      const uint64_t start = weight ? range.tensor.offset - weight->offset : 0;
      if (weight == nullptr || weight->file_index != range.tensor.file_index ||
          start + range.tensor.n_bytes > weight->n_bytes || weight->ne[0] != range.tensor.ne[0] ||
          start % weight->ne[0] != 0) {
        fail("convert: ", planned.name, ": '", range.tensor.name,
             "' is not whole rows of one FP8 weight");
      }
      const std::string scale_name = weight->name + "_scale_inv";
      const TensorInfo* scale = snapshot.find_tensor(scale_name);
      if (scale == nullptr) {
        fail("safetensors: ", snapshot.display_name(), ": FP8 tensor '", weight->name, "' has no '",
             scale_name, "'");
      }
      const uint64_t rows = weight->n_rows(), cols = weight->ne[0];
      const uint64_t want_rows = (rows + uint64_t(block->rows) - 1) / uint64_t(block->rows);
      const uint64_t want_cols = (cols + uint64_t(block->cols) - 1) / uint64_t(block->cols);
      const bool floats =
          scale->type == QType::F32 || scale->type == QType::BF16 || scale->type == QType::F16;
      if (!floats || scale->n_dims != 2 || scale->ne[0] != want_cols || scale->ne[1] != want_rows) {
        fail("safetensors: ", snapshot.display_name(), ": '", scale_name, "' must be a float [",
             want_rows, ", ", want_cols, "] (blocks of ", block->rows, " x ", block->cols,
             " over [", rows, ", ", cols, "])");
      }
      range.scale = *scale;
      range.scale_row0 = start / weight->ne[0];  // e4m3: one byte per element
    }
  }
}

void scale_fp8_row(const float* scales, int64_t scale_cols, Fp8BlockSize block, uint64_t row,
                   float* values, int64_t n) {
  const float* row_scales = scales + int64_t(row / uint64_t(block.rows)) * scale_cols;
  for (int64_t j = 0; j < n; ++j) values[j] *= row_scales[j / block.cols];
}

}  // namespace sluice::convert
