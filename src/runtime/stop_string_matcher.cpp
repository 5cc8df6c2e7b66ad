// StopStringMatcher (stop_string_matcher.h). Only a tail shorter than the longest stop string
// is ever held, so each piece costs a search over a few dozen bytes, whatever the output length.
#include "runtime/stop_string_matcher.h"

#include <algorithm>
#include <utility>

#include "text/tokenizer/utf8.h"

namespace sluice::runtime {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings)
    : stop_strings_(std::move(stop_strings)) {
  std::erase_if(stop_strings_, [](const std::string& s) { return s.empty(); });
}

std::string StopStringMatcher::feed(std::string_view piece) {
  if (stopped_) return {};
  pending_.append(piece);

  // The held text contains no whole stop string, so every match ends in this piece. Taking the
  // earliest end (then the earliest start) is what a byte-at-a-time scan would find, which is
  // what makes the result independent of where the pieces were cut.
  size_t best_start = std::string::npos;
  size_t best_end = std::string::npos;
  const std::string* best = nullptr;
  for (const std::string& stop : stop_strings_) {
    const size_t start = pending_.find(stop);
    if (start == std::string::npos) continue;
    const size_t end = start + stop.size();
    if (end < best_end || (end == best_end && start < best_start)) {
      best_start = start;
      best_end = end;
      best = &stop;
    }
  }
  if (best) {
    std::string emitted = pending_.substr(0, best_start);
    matched_ = *best;
    stopped_ = true;
    pending_.clear();
    return emitted;
  }

  // A held stop-string prefix starts on a character boundary when the stop string is valid
  // UTF-8; the second bound keeps a character cut short by the piece boundary back as well.
  const size_t n_emit =
      std::min(pending_.size() - held_suffix_length(), text::utf8_complete_prefix(pending_));
  std::string emitted = pending_.substr(0, n_emit);
  pending_.erase(0, n_emit);
  return emitted;
}

std::string StopStringMatcher::flush() {
  std::string rest = std::move(pending_);
  pending_.clear();
  return rest;
}

// The longest tail of pending_ that is a proper prefix of some stop string: it may still
// become that stop string once more text arrives.
size_t StopStringMatcher::held_suffix_length() const {
  const std::string_view text = pending_;
  size_t longest = 0;
  for (const std::string& stop : stop_strings_) {
    for (size_t n = std::min(stop.size() - 1, text.size()); n > longest; --n) {
      if (text.substr(text.size() - n) == std::string_view(stop).substr(0, n)) {
        longest = n;
        break;
      }
    }
  }
  return longest;
}

}  // namespace sluice::runtime
