// `sluice convert`: a Hugging Face safetensors snapshot (config.json, *.safetensors,
// tokenizer.json) written as one GGUF with llama.cpp's tensor names, metadata keys and numeric
// conventions, so llama.cpp and Sluice both load it. Knows nothing of how the work is done.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace sluice {

struct ConvertOptions {
  // Weight matrices' type: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K or Q6_K (any case). Empty:
  // llama.cpp's guess — BF16 for a BF16 snapshot, else F16. Norms, biases and routers stay F32.
  std::string type;
  // The routed experts' type (same names); empty: `type`.
  std::string expert_type;
};

// Reads the snapshot in `hf_dir` and writes `out_path` (a temporary name renamed at the end, so a
// failure leaves no file). `progress` sees bytes written of the total. Throws sluice::Error
// naming the file and key for anything it cannot convert.
void convert_hf_snapshot(const std::string& hf_dir, const std::string& out_path,
                         const ConvertOptions& options,
                         const std::function<void(uint64_t done, uint64_t total)>& progress = {});

}  // namespace sluice
