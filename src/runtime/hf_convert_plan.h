// The plan of one `sluice convert`: the GGUF's metadata and, for each GGUF tensor, which rows
// of which snapshot tensors make it and how llama.cpp's converter changes their numbers. Built
// by the family code (hf_convert_plan.cpp, hf_convert_gpt_oss.cpp) and the vocabulary code;
// carried out by hf_convert.cpp. Knows no output types and writes nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "format/model_file.h"

namespace sluice::convert {

// The block of one FP8 scale (config.json's quantization_config.weight_block_size).
struct Fp8BlockSize {
  int64_t rows = 128;
  int64_t cols = 128;
};

// Rows [first_row, first_row + n_rows) of one snapshot tensor (rows along its slowest HF dim).
struct RowRange {
  TensorInfo tensor;
  uint64_t first_row = 0;
  uint64_t n_rows = 0;
  // An FP8 weight's block scales ("<name>_scale_inv"; hf_convert_fp8.h), else nullopt.
  std::optional<TensorInfo> scale = std::nullopt;
  uint64_t scale_row0 = 0;  // where `tensor` starts among the scaled weight's rows (a slice)
  // The whole 2-D tensor written transposed: its ne[0] columns become n_rows rows of its
  // rows' count (deepseek's attn_k_b from the K rows of kv_b_proj).
  bool transpose = false;
  // Every row_step-th row from first_row, and of each row (transposed: of the columns made rows)
  // only first_column, first_column + column_step, …: gpt-oss's gate and up, interleaved.
  uint64_t row_step = 1;
  uint64_t first_column = 0;
  uint64_t column_step = 1;
  // A Hub MXFP4 expert stack: `tensor` holds each row's 4-bit values (U8, 16 bytes per 32, two
  // values a byte, the even one low), this its E8M0 block exponents (U8, one per 32). Copied into
  // GGUF MXFP4 blocks as llama.cpp's converter does, never requantized (hf_convert_gpt_oss.h).
  std::optional<TensorInfo> mxfp4_scales = std::nullopt;
};

// What llama.cpp's converter keeps in F32 whatever the requested type; kMxfp4Copy: MXFP4
// blocks copied as they are whatever the requested types (gpt-oss's Hub experts).
enum class TensorRole { kMatrix, kExperts, kKeepF32, kMxfp4Copy };

struct PlannedTensor {
  std::string name;            // GGUF name
  std::vector<uint64_t> ne;    // GGUF shape, first dimension fastest
  std::vector<RowRange> rows;  // concatenated in order: ne[1] * ne[2] * … rows of ne[0] floats
  TensorRole role = TensorRole::kMatrix;
  // llama's Q/K: rows of each head reordered from HF's rotate_half halves to adjacent pairs.
  uint32_t permute_heads = 0;
  bool add_one = false;  // gemma's (1 + w) norms stored as 1 + w
  // A tensor computed rather than read (llama3's rope_freqs.weight): these float32 values, and
  // no rows.
  std::vector<float> values = {};
};

struct Plan {
  std::string arch;  // general.architecture
  std::vector<MetaEntry> metadata;
  std::vector<PlannedTensor> tensors;
  int64_t n_vocab = 0;     // rows of token_embd: the vocabulary is padded to it
  Fp8BlockSize fp8_block;  // of the FP8 ranges' scales
};

// The model part of the plan from the snapshot catalogue `snapshot`, whose sources the planned
// tensors' file indices refer to: every family model/hf_snapshot.h translates.
Plan plan_model(const ModelFile& snapshot, const std::string& hf_dir);

// Appends the tokenizer.ggml.* keys from hf_dir's tokenizer.json (+ tokenizer_config.json).
void add_vocabulary(const std::string& hf_dir, Plan& plan);

}  // namespace sluice::convert
