// Streaming an answer and describing how fast it came. A failed write ends generation through
// the callback's return value rather than an exception thrown into the engine's token loop.
#include "cli/answer.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "sluice/error.h"

namespace sluice::cli {
namespace {

std::string rate(double count, double seconds) {
  if (count <= 0 || seconds <= 0) return "- tokens/s";
  char text[48];
  std::snprintf(text, sizeof text, "%.1f tokens/s", count / seconds);
  return text;
}

}  // namespace

GenerationRequest make_request(const AnswerSettings& settings, std::vector<int32_t> prompt,
                               int64_t n_ctx) {
  GenerationRequest request = settings.base;
  const auto room = n_ctx - static_cast<int64_t>(prompt.size());
  // No limit given: as many as fit; at least one, so a full context is the engine's to report.
  request.max_tokens = settings.max_tokens >= 0 ? settings.max_tokens : std::max<int64_t>(room, 1);
  request.prompt = std::move(prompt);
  return request;
}

GenerationResult stream_answer(Session& session, const GenerationRequest& request,
                               const std::atomic<bool>* cancel) {
  bool write_failed = false;
  auto on_token = [&](const TokenEvent& event) {
    if (event.text.empty()) return true;
    write_failed =
        std::fwrite(event.text.data(), 1, event.text.size(), stdout) != event.text.size() ||
        std::fflush(stdout) != 0;
    return !write_failed;
  };
  GenerationResult result = session.generate(request, on_token, cancel);
  if (write_failed) throw Error("cannot write to stdout");
  return result;
}

std::string format_stats(const GenerationStats& stats) {
  const int64_t fresh = stats.n_prompt - stats.n_prompt_reused;
  // generate_seconds starts after the first token, so it covers the other n_generated - 1.
  const int64_t decoded = stats.n_generated > 0 ? stats.n_generated - 1 : 0;
  char text[512];
  std::snprintf(
      text, sizeof text,
      "prompt:      %lld tokens, %lld reused, %s\n"
      "generation:  %lld tokens, %s\n"
      "first token: %.3f s\n"
      "peak RSS:    %.1f MiB\n",
      static_cast<long long>(stats.n_prompt), static_cast<long long>(stats.n_prompt_reused),
      rate(static_cast<double>(fresh), stats.prompt_seconds).c_str(),
      static_cast<long long>(stats.n_generated),
      rate(static_cast<double>(decoded), stats.generate_seconds).c_str(), stats.first_token_seconds,
      static_cast<double>(peak_rss_bytes()) / (1024.0 * 1024.0));
  return text;
}

}  // namespace sluice::cli
