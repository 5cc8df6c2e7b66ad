// Generation and Session::generate: reuse the cached prefix, prefill the rest a chunk per step,
// then sample a token per step, streaming complete UTF-8 text with stop strings held back until
// they can no longer match. The forward and the sampler allocate nothing per token; only the
// streamed text (and logprobs, when asked for) do.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

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

namespace {

// log-softmax of the raw logits: the chosen token's value and, when asked, the `top` best.
void fill_logprobs(const std::vector<float>& logits, int32_t top, TokenEvent& event) {
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l) - max_logit);
  const double log_z = max_logit + std::log(sum);
  event.logprob = float(logits[size_t(event.id)] - log_z);
  if (top <= 0) return;
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int32_t(i);
  const size_t n_top = std::min(order.size(), size_t(top));
  std::partial_sort(order.begin(), order.begin() + ptrdiff_t(n_top), order.end(),
                    [&](int32_t a, int32_t b) {
                      return logits[size_t(a)] > logits[size_t(b)] ||
                             (logits[size_t(a)] == logits[size_t(b)] && a < b);
                    });
  for (size_t i = 0; i < n_top; ++i) {
    event.top.push_back({order[i], float(logits[size_t(order[i])] - log_z)});
  }
}

}  // namespace

struct Generation::Impl {
  Impl(Session::Impl& session, GenerationRequest request_in, const std::atomic<bool>* cancel_in)
      : s(session),
        request(std::move(request_in)),
        cancel(cancel_in),
        sampler(request.sampling, s.n_vocab),
        tokenizer(s.model->tokenizer().impl().tokenizer),
        decoder(tokenizer, decode_options(request), /*at_text_start=*/false),
        stops(request.stop_strings) {}

  static text::DecodeOptions decode_options(const GenerationRequest& request) {
    text::DecodeOptions options;
    options.skip_special = !request.emit_special;
    return options;
  }

  bool cancelled() const {
    return stop_requested || (cancel != nullptr && cancel->load(std::memory_order_relaxed));
  }
  // The next prefill chunk (the same chunks as a generation run alone: at most n_batch).
  std::span<const int32_t> next_chunk();
  void chunk_done(size_t n);
  // Samples the next token; true when it must now be evaluated (the generation goes on).
  bool sample_next(std::vector<TokenEvent>& events);
  // A step is the forward of what awaits evaluation (a prefill chunk, or the token sampled
  // last) and then, as soon as its logits are there, the next token sampled and streamed.
  // Returns the tokens the forward must evaluate, empty when none (finished, or cancelled).
  std::span<const int32_t> step_before_forward(std::vector<TokenEvent>& events);
  void step_after_forward(size_t n_evaluated, std::vector<TokenEvent>& events);
  void sample_now(std::vector<TokenEvent>& events);
  void finish(StopReason reason, std::vector<TokenEvent>& events);

  Session::Impl& s;
  GenerationRequest request;
  const std::atomic<bool>* cancel;
  bool stop_requested = false;
  runtime::Sampler sampler;
  const text::Tokenizer& tokenizer;
  text::StreamingDecoder decoder;
  runtime::StopStringMatcher stops;
  GenerationResult result;
  bool started = false, decoding = false, done = false;
  size_t prefill_next = 0;  // next prompt position to evaluate
  Clock::time_point start, first_token_time;
};

std::span<const int32_t> Generation::Impl::next_chunk() {
  if (!started) {
    started = true;
    start = Clock::now();
    prefill_next = size_t(s.rewind_to_common_prefix(request.prompt));
    result.stats.n_prompt_reused = int64_t(prefill_next);
  }
  const size_t n = std::min(request.prompt.size() - prefill_next, size_t(s.n_batch));
  return std::span<const int32_t>(request.prompt).subspan(prefill_next, n);
}

void Generation::Impl::chunk_done(size_t n) {
  prefill_next += n;
  if (prefill_next == request.prompt.size()) {
    decoding = true;
    result.stats.prompt_seconds = seconds_since(start);
  }
}

bool Generation::Impl::sample_next(std::vector<TokenEvent>& events) {
  const int32_t id = sampler.sample(s.last_logits.data(), s.tokens);
  if (result.tokens.empty()) {
    first_token_time = Clock::now();
    result.stats.first_token_seconds = seconds_since(start);
  }
  result.tokens.push_back(id);
  StopReason reason = StopReason::kEndOfGeneration;
  const bool stop_token = is_stop_token(request, tokenizer, id, &reason);
  TokenEvent& event = events.emplace_back();
  event.id = id;
  event.ends = stop_token;
  if (request.logprobs) fill_logprobs(s.last_logits, request.top_logprobs, event);
  if (!stop_token || request.emit_special) event.text = stops.feed(decoder.push(id));
  result.text += event.text;
  StopReason end = StopReason::kMaxTokens;
  if (stop_token) {
    end = reason;
  } else if (stops.stopped()) {
    end = StopReason::kStopString;
  } else if (int64_t(result.tokens.size()) == request.max_tokens) {
    end = StopReason::kMaxTokens;
  } else if (int64_t(s.tokens.size()) >= s.n_ctx) {
    end = StopReason::kContextFull;
  } else {
    return true;
  }
  finish(end, events);
  return false;
}

std::span<const int32_t> Generation::Impl::step_before_forward(std::vector<TokenEvent>& events) {
  if (done) return {};
  if (cancelled()) {
    finish(StopReason::kCancelled, events);
    return {};
  }
  if (!decoding) return next_chunk();
  return std::span<const int32_t>(result.tokens).last(1);  // sampled, not yet evaluated
}

void Generation::Impl::step_after_forward(size_t n_evaluated, std::vector<TokenEvent>& events) {
  if (!decoding) {
    chunk_done(n_evaluated);
    if (!decoding) return;  // more of the prompt to come
  }
  sample_now(events);
}

void Generation::Impl::sample_now(std::vector<TokenEvent>& events) {
  if (request.max_tokens == 0) return finish(StopReason::kMaxTokens, events);
  sample_next(events);  // the token, unless it ended the generation, awaits the next forward
}

void Generation::Impl::finish(StopReason reason, std::vector<TokenEvent>& events) {
  done = true;
  result.stop_reason = reason;
  result.stop_string = stops.matched();
  if (!started) return;
  // Text still held back (a partial UTF-8 sequence or a possible stop-string start) goes out
  // at the end unless a stop string matched.
  if (!stops.stopped()) {
    std::string tail = stops.feed(decoder.flush());
    tail += stops.flush();
    if (!tail.empty()) {
      result.text += tail;
      events.emplace_back().text = std::move(tail);
    }
  }
  if (!decoding) result.stats.prompt_seconds = seconds_since(start);
  result.stats.n_generated = int64_t(result.tokens.size());
  result.stats.generate_seconds = result.tokens.empty() ? 0.0 : seconds_since(first_token_time);
}

Generation::Generation(Session& session, GenerationRequest request,
                       const std::atomic<bool>* cancel) {
  Session::Impl& s = *session.impl_;
  if (request.prompt.empty()) fail("generate: the prompt has no tokens");
  if (request.max_tokens < 0) fail("max tokens must not be negative, got ", request.max_tokens);
  if (request.top_logprobs < 0 || request.top_logprobs > 20) {
    fail("top_logprobs must be between 0 and 20, got ", request.top_logprobs);
  }
  s.check_ids(request.prompt);
  if (int64_t(request.prompt.size()) > s.n_ctx) {
    fail("the prompt has ", request.prompt.size(), " tokens but the context holds ", s.n_ctx,
         " (use a larger --ctx)");
  }
  impl_ = std::make_unique<Impl>(s, std::move(request), cancel);
  impl_->result.stats.n_prompt = int64_t(impl_->request.prompt.size());
}

Generation::~Generation() = default;

bool Generation::step(std::vector<TokenEvent>& events) {
  Impl& g = *impl_;
  const std::span<const int32_t> tokens = g.step_before_forward(events);
  if (!tokens.empty()) {
    g.s.forward_chunk(tokens, nullptr);
    g.step_after_forward(tokens.size(), events);
  }
  return !g.done;
}

void Generation::step_all(std::span<Generation* const> generations,
                          std::span<std::vector<TokenEvent>* const> events) {
  if (events.size() != generations.size()) fail("step_all: one event list per generation");
  // Reused across steps: the token loop allocates nothing once they have grown.
  thread_local std::vector<Session::Impl::BatchItem> batch;
  thread_local std::vector<std::pair<Impl*, std::vector<TokenEvent>*>> batched;
  batch.clear();
  batched.clear();
  int64_t budget = 0;  // tokens one forward may take: the smallest n_batch of the sessions
  for (Generation* g : generations) {
    budget = budget == 0 ? g->impl_->s.n_batch : std::min(budget, g->impl_->s.n_batch);
  }
  for (size_t i = 0; i < generations.size(); ++i) {
    Impl& g = *generations[i]->impl_;
    const std::span<const int32_t> tokens = g.step_before_forward(*events[i]);
    if (tokens.empty()) continue;
    // A chunk that does not fit beside the others runs alone: each sequence keeps the chunks
    // it would have alone, so the numbers stay those of generating it alone.
    if (int64_t(tokens.size()) > budget) {
      g.s.forward_chunk(tokens, nullptr);
      g.step_after_forward(tokens.size(), *events[i]);
      continue;
    }
    budget -= int64_t(tokens.size());
    batch.push_back({&g.s, tokens});
    batched.push_back({&g, events[i]});
  }
  if (batch.empty()) return;
  Session::Impl::forward_batch(batch);
  for (size_t i = 0; i < batched.size(); ++i) {
    batched[i].first->step_after_forward(batch[i].tokens.size(), *batched[i].second);
  }
}

bool Generation::finished() const {
  return impl_->done;
}

bool Generation::prefilling() const {
  return !impl_->decoding;
}

void Generation::stop() {
  impl_->stop_requested = true;
}

const GenerationResult& Generation::result() const {
  return impl_->result;
}

GenerationResult Session::generate(const GenerationRequest& request,
                                   const std::function<bool(const TokenEvent&)>& on_token,
                                   const std::atomic<bool>* cancel) {
  Generation generation(*this, request, cancel);
  std::vector<TokenEvent> events;
  bool running = true;
  while (running) {
    events.clear();
    running = generation.step(events);
    for (const TokenEvent& event : events) {
      // A callback that declines a token ends the generation as cancelled after it.
      if (on_token && !on_token(event) && event.id >= 0) generation.stop();
    }
  }
  return generation.result();
}

}  // namespace sluice
