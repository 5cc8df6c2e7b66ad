// StopStringMatcher: finds the caller's stop strings in generated text that arrives in pieces,
// and says which text is safe to stream. It holds back any tail that could still grow into a
// stop string (and a UTF-8 sequence cut short), so a stop string is never half-emitted. Works on
// bytes; knows nothing of tokens, tokenizers or sessions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sluice::runtime {

class StopStringMatcher {
 public:
  // Empty strings are ignored (they would match everywhere).
  explicit StopStringMatcher(std::vector<std::string> stop_strings);

  // Appends `piece` and returns the text that is now safe to emit. When a stop string
  // completes, returns the text before it and stops: the stop string and everything after it
  // (in this piece and any later one) are dropped. The stop that completes first in the stream
  // wins; of two completing at the same byte, the longer one. Emitted text never depends on
  // how the stream was cut into pieces.
  std::string feed(std::string_view piece);

  bool stopped() const { return stopped_; }
  // The stop string that matched ("" when none has).
  const std::string& matched() const { return matched_; }

  // End of generation: returns the text still held back ("" after a stop) and clears it.
  std::string flush();

 private:
  size_t held_suffix_length() const;

  std::vector<std::string> stop_strings_;
  std::string pending_;  // text received but not yet emitted
  std::string matched_;
  bool stopped_ = false;
};

}  // namespace sluice::runtime
