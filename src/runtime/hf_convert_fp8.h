// FP8 block-scaled checkpoints (DeepSeek V3/R1, Qwen3 "-FP8", GLM): each linear weight is
// float8 e4m3 with a float scale per block of weight_block_size rows × columns, stored as the
// companion tensor "<name>_scale_inv" [ceil(rows / block_rows), ceil(cols / block_cols)] (the
// name is historical: the stored number multiplies). Conversion dequantizes them as llama.cpp's
// converter does — each element's float value times its block's scale, one rounding — and then
// writes the requested GGUF type. Running such a snapshot directly is not offered.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "format/model_file.h"
#include "runtime/hf_convert_plan.h"

namespace sluice::convert {

// config.json's quantization_config when quant_method is "fp8" (weight_block_size, default
// 128 × 128); nullopt for a snapshot that is not FP8. Other quant_methods are refused.
std::optional<Fp8BlockSize> read_fp8_config(const std::string& hf_dir);

// A companion scale tensor, which the planners skip: the weight it scales carries it.
bool is_fp8_scale_name(std::string_view hf_name);

// Gives every planned row range whose source is F8_E4M3 its scale tensor (found by the source's
// Hugging Face name in `snapshot`) and checks the scale's shape; refuses a range without one, or
// an FP8 weight in a snapshot whose config does not say fp8.
void attach_fp8_scales(const ModelFile& snapshot, const std::string& hf_dir, Plan& plan);

// row[0..n) of source row `row` times its blocks' scales; `scales` is the whole scale tensor as
// float32, [ceil(rows / block.rows), scale_cols].
void scale_fp8_row(const float* scales, int64_t scale_cols, Fp8BlockSize block, uint64_t row,
                   float* values, int64_t n);

}  // namespace sluice::convert
