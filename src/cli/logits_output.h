// How `sluice eval` hands logits out: a raw little-endian float32 file written atomically, one
// JSON object whose floats read back bit for bit, or a short summary for people.
// Knows nothing of models: rows of n_vocab floats in, bytes and text out.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace sluice::cli {

// Writes `logits` ([rows, n_vocab], row-major) to `path` through a temporary name and a rename,
// so a failure never leaves a partial file. Throws sluice::Error naming the path.
void write_logits_file(const std::string& path, std::span<const float> logits);

// {"n_vocab": V, "n_tokens": T, "logits": [[…], …], "greedy_tokens": […]} and a newline.
std::string logits_json(int64_t n_vocab, int64_t n_tokens, std::span<const float> logits,
                        const std::vector<int32_t>& greedy_tokens);

// The `k` highest logits of one row as "  id  logit" lines, best first (ties: lowest id).
std::string top_logits_summary(std::span<const float> row, int k);

// The id of the highest logit; ties go to the lowest id (as llama.cpp's greedy sampler).
int32_t argmax(std::span<const float> row);

}  // namespace sluice::cli
