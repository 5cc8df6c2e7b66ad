// One answer of `sluice run`: the generated text streamed to stdout piece by piece (flushed, so a
// reader sees each token as it comes), and the --stats / /stats report of a generation.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "sluice/engine.h"

namespace sluice::cli {

// What every answer of one `sluice run` shares: sampling, stop strings, the token limit.
struct AnswerSettings {
  GenerationRequest base;   // everything but the prompt and max_tokens
  int64_t max_tokens = -1;  // < 0: until the context is full
  bool print_stats = false;
};

GenerationRequest make_request(const AnswerSettings& settings, std::vector<int32_t> prompt,
                               int64_t n_ctx);

// Generates and streams; throws sluice::Error when stdout cannot be written (closed pipe).
GenerationResult stream_answer(Session& session, const GenerationRequest& request,
                               const std::atomic<bool>* cancel);

// Lines for stderr: prompt tokens and speed, generation tokens and speed, time to first token,
// peak RSS.
std::string format_stats(const GenerationStats& stats);

}  // namespace sluice::cli
