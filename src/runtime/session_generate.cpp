// Session::generate: reuse the cached prefix, prefill the rest, then sample token by token,
// streaming complete UTF-8 text with stop strings held back until they can no longer match.
// The forward and the sampler allocate nothing per token; only the streamed text does.
#include <chrono>

#include "core/error.h"
#include "runtime/sampler.h"
#include "runtime/session_state.h"
#include "runtime/stop_string_matcher.h"
#include "runtime/text_tokenizer_impl.h"

namespace sluice {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

bool is_stop_token(const GenerationRequest& request, const text::Tokenizer& tokenizer, int32_t id,
                   StopReason* reason) {
  if (tokenizer.is_end_of_generation(id)) {
    *reason = StopReason::kEndOfGeneration;
    return true;
  }
  for (int32_t stop : request.stop_tokens) {
    if (stop == id) {
      *reason = StopReason::kStopToken;
      return true;
    }
  }
  return false;
}

}  // namespace

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::kMaxTokens:
      return "length";
    case StopReason::kEndOfGeneration:
      return "eog";
    case StopReason::kStopToken:
      return "stop_token";
    case StopReason::kStopString:
      return "stop";
    case StopReason::kCancelled:
      return "cancelled";
    case StopReason::kContextFull:
      return "context_full";
  }
  return "unknown";
}

GenerationResult Session::generate(const GenerationRequest& request,
                                   const std::function<bool(const TokenEvent&)>& on_token,
                                   const std::atomic<bool>* cancel) {
  Impl& s = *impl_;
  if (request.prompt.empty()) fail("generate: the prompt has no tokens");
  if (request.max_tokens < 0) fail("max tokens must not be negative, got ", request.max_tokens);
  s.check_ids(request.prompt);
  if (int64_t(request.prompt.size()) > s.n_ctx) {
    fail("the prompt has ", request.prompt.size(), " tokens but the context holds ", s.n_ctx,
         " (use a larger --ctx)");
  }
  runtime::Sampler sampler(request.sampling, s.n_vocab);
  const text::Tokenizer& tokenizer = s.model->tokenizer().impl().tokenizer;
  text::DecodeOptions decode_options;
  decode_options.skip_special = !request.emit_special;
  text::StreamingDecoder decoder(tokenizer, decode_options, /*at_text_start=*/false);
  runtime::StopStringMatcher stops(request.stop_strings);

  GenerationResult result;
  result.stats.n_prompt = int64_t(request.prompt.size());
  const Clock::time_point start = Clock::now();
  const int64_t kept = s.rewind_to_common_prefix(request.prompt);
  result.stats.n_prompt_reused = kept;
  const std::span<const int32_t> rest = std::span(request.prompt).subspan(size_t(kept));
  if (!s.append(rest, nullptr, cancel)) {
    result.stop_reason = StopReason::kCancelled;
    result.stats.prompt_seconds = seconds_since(start);
    return result;
  }
  result.stats.prompt_seconds = seconds_since(start);

  const Clock::time_point gen_start = Clock::now();
  Clock::time_point first_token_time = gen_start;
  std::span<const int32_t> history = s.tokens;
  result.stop_reason = StopReason::kMaxTokens;
  for (int64_t i = 0; i < request.max_tokens; ++i) {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
      result.stop_reason = StopReason::kCancelled;
      break;
    }
    history = s.tokens;
    const int32_t id = sampler.sample(s.last_logits.data(), history);
    if (i == 0) {
      first_token_time = Clock::now();
      result.stats.first_token_seconds = seconds_since(start);
    }
    result.tokens.push_back(id);
    StopReason reason;
    const bool stop_token = is_stop_token(request, tokenizer, id, &reason);
    TokenEvent event;
    event.id = id;
    if (!stop_token || request.emit_special) event.text = stops.feed(decoder.push(id));
    result.text += event.text;
    const bool keep_going = !on_token || on_token(event);
    if (stop_token) {
      result.stop_reason = reason;
      break;
    }
    if (stops.stopped()) {
      result.stop_reason = StopReason::kStopString;
      break;
    }
    if (!keep_going) {
      result.stop_reason = StopReason::kCancelled;
      break;
    }
    if (i + 1 == request.max_tokens) break;
    if (int64_t(s.tokens.size()) >= s.n_ctx) {
      result.stop_reason = StopReason::kContextFull;
      break;
    }
    const int32_t next[1] = {id};
    s.append(next, nullptr, nullptr);
  }
  // Text still held back (a partial UTF-8 sequence or a possible stop-string start) goes out
  // at the end unless a stop string matched.
  if (!stops.stopped()) {
    TokenEvent tail;
    tail.text = stops.feed(decoder.flush());
    tail.text += stops.flush();
    if (!tail.text.empty()) {
      result.text += tail.text;
      if (on_token) on_token(tail);
    }
  }
  result.stats.n_generated = int64_t(result.tokens.size());
  result.stats.generate_seconds =
      result.tokens.empty()
          ? 0.0
          : std::chrono::duration<double>(Clock::now() - first_token_time).count();
  return result;
}

}  // namespace sluice
