// gpt-oss snapshots (model_type gpt_oss) for `sluice convert`, as llama.cpp's GptOssModel
// converter writes them. Two layouts of the routed experts exist, neither readable in place:
// - transformers' own parameters (what transformers 5 saves): mlp.experts.gate_up_proj
//   [n_expert, n_embd, 2 n_ff] with gate and up interleaved along the last dimension (gate the
//   even features, up the odd), down_proj [n_expert, n_ff, n_embd] — both transposed relative to
//   GGUF — and gate_up_proj_bias [n_expert, 2 n_ff] interleaved the same way;
// - the Hub's MXFP4 (openai/gpt-oss-20b, -120b; quantization_config.quant_method "mxfp4"):
//   mlp.experts.gate_up_proj_blocks [n_expert, 2 n_ff, n_embd / 32, 16] (U8, two 4-bit values a
//   byte, the even one in the low nibble) with gate_up_proj_scales [n_expert, 2 n_ff, n_embd / 32]
//   (U8 E8M0 exponents), the rows interleaved gate/up; down_proj_blocks/_scales likewise with
//   [n_expert, n_embd, …] rows. These blocks are repacked into GGUF MXFP4 blocks and never
//   requantized, whatever --type says (llama.cpp's converter does the same).
// Running such a snapshot directly is refused by model/hf_snapshot.cpp with the convert command.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "format/model_file.h"
#include "runtime/hf_convert_plan.h"

namespace sluice::convert {

// The whole plan when hf_dir's config.json says model_type gpt_oss, else nullopt. Refuses what
// llama.cpp's gpt-oss graph cannot compute as transformers does (layer_types other than sliding /
// full alternating from layer 0, swiglu_limit other than 7, no attention biases, RoPE scaling
// other than YaRN) and tensors it cannot name.
std::optional<Plan> plan_gpt_oss(const ModelFile& snapshot, const std::string& hf_dir);

// One row of n_blocks MXFP4 blocks from the Hub's layout (`values`: 16 bytes a block, value 2i
// in the low nibble of byte i and 2i + 1 in the high; `exponents`: one byte a block) into GGUF's
// (per block the exponent byte, then 16 bytes with value j low and j + 16 high).
void mxfp4_row_from_hub(const uint8_t* values, const uint8_t* exponents, uint64_t n_blocks,
                        uint8_t* out);

// Refuses an MXFP4 copy range whose sources are not U8 values and exponents of `tensor`'s row
// length, or whose rows run past them.
void check_mxfp4_rows(const ModelFile& snapshot, const PlannedTensor& tensor,
                      const RowRange& range);

}  // namespace sluice::convert
