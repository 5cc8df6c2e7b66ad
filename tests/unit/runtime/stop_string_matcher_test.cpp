// StopStringMatcher: text before a stop string is emitted and the rest dropped, a tail that could
// still become a stop string is held (and released when it cannot), the result does not depend
// on where the pieces were cut (including inside UTF-8 sequences), and flush returns what is held.
#include "runtime/stop_string_matcher.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sluice::runtime {
namespace {

struct Streamed {
  std::vector<std::string> emitted;  // what each feed returned
  std::string text;                  // all of it, plus flush
  bool stopped = false;
};

Streamed feed_all(const std::vector<std::string>& stops, const std::vector<std::string>& pieces) {
  StopStringMatcher matcher(stops);
  Streamed run;
  for (const std::string& piece : pieces) {
    run.emitted.push_back(matcher.feed(piece));
    run.text += run.emitted.back();
  }
  run.stopped = matcher.stopped();
  run.text += matcher.flush();
  return run;
}

std::vector<std::string> bytes_of(const std::string& text) {
  std::vector<std::string> pieces;
  for (char c : text) pieces.emplace_back(1, c);
  return pieces;
}

TEST(StopStringMatcher, WithoutStopStringsTextPassesStraightThrough) {
  const Streamed run = feed_all({}, {"Hello", ", world"});
  EXPECT_EQ(run.emitted, (std::vector<std::string>{"Hello", ", world"}));
  EXPECT_FALSE(run.stopped);
}

TEST(StopStringMatcher, EmitsTextBeforeTheStopAndDropsTheRest) {
  StopStringMatcher matcher({"</s>"});
  EXPECT_EQ(matcher.feed("Hello</s>world"), "Hello");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.matched(), "</s>");
  EXPECT_EQ(matcher.feed("more"), "");  // nothing after a stop
  EXPECT_EQ(matcher.flush(), "");
}

TEST(StopStringMatcher, HoldsAPossibleStartAcrossPieces) {
  const Streamed run = feed_all({"</s>"}, {"Hel", "lo <", "/", "s> tail"});
  EXPECT_EQ(run.emitted, (std::vector<std::string>{"Hel", "lo ", "", ""}));
  EXPECT_TRUE(run.stopped);
  EXPECT_EQ(run.text, "Hello ");
}

TEST(StopStringMatcher, ReleasesAHeldPrefixThatDidNotComplete) {
  const Streamed run = feed_all({"</s>"}, {"a</", "b"});
  EXPECT_EQ(run.emitted, (std::vector<std::string>{"a", "</b"}));
  EXPECT_FALSE(run.stopped);
}

TEST(StopStringMatcher, OverlappingPrefixFindsAabInAaab) {
  const Streamed run = feed_all({"aab"}, bytes_of("aaab"));
  // "aaa" can only be followed by a stop after its last two bytes: the first is released.
  EXPECT_EQ(run.emitted, (std::vector<std::string>{"", "", "a", ""}));
  EXPECT_TRUE(run.stopped);
  EXPECT_EQ(run.text, "a");
  EXPECT_EQ(feed_all({"aab"}, {"aaab"}).text, "a");
}

TEST(StopStringMatcher, EveryCutOfTheStreamGivesTheSameText) {
  const std::string text = "The answer is 42.\nUser: next";
  const std::vector<std::string> stops = {"\nUser:", "###"};
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    for (size_t cut2 = cut; cut2 <= text.size(); ++cut2) {
      const Streamed run =
          feed_all(stops, {text.substr(0, cut), text.substr(cut, cut2 - cut), text.substr(cut2)});
      EXPECT_EQ(run.text, "The answer is 42.") << cut << "," << cut2;
      EXPECT_TRUE(run.stopped);
    }
  }
  EXPECT_EQ(feed_all(stops, bytes_of(text)).text, "The answer is 42.");
}

TEST(StopStringMatcher, FirstStopInTheTextWinsAmongSeveral) {
  const Streamed run = feed_all({"###", "END"}, {"foo E", "ND bar ###"});
  EXPECT_EQ(run.text, "foo ");
  StopStringMatcher matcher({"###", "END"});
  matcher.feed("x ### END");
  EXPECT_EQ(matcher.matched(), "###");
}

TEST(StopStringMatcher, TheStopCompletingFirstWinsWhateverTheCuts) {
  // "bc" completes at byte 3, before "abcd" could: a byte-at-a-time stream stops there, so a
  // stream in one piece must too.
  for (const auto& pieces : {std::vector<std::string>{"abcd"}, bytes_of("abcd")}) {
    StopStringMatcher matcher({"abcd", "bc"});
    std::string text;
    for (const std::string& piece : pieces) text += matcher.feed(piece);
    EXPECT_EQ(text, "a");
    EXPECT_EQ(matcher.matched(), "bc");
  }
  // Completing at the same byte: the longer one (it starts earlier).
  StopStringMatcher matcher({"cd", "bcd"});
  EXPECT_EQ(matcher.feed("abcd"), "a");
  EXPECT_EQ(matcher.matched(), "bcd");
}

TEST(StopStringMatcher, FlushReturnsWhatWasHeldBack) {
  StopStringMatcher matcher({"<|end|>"});
  EXPECT_EQ(matcher.feed("done <|en"), "done ");
  EXPECT_FALSE(matcher.stopped());
  EXPECT_EQ(matcher.flush(), "<|en");
  EXPECT_EQ(matcher.flush(), "");
}

TEST(StopStringMatcher, EmptyStopStringsAreIgnored) {
  const Streamed run = feed_all({"", "zz"}, {"abc", "z"});
  EXPECT_EQ(run.emitted, (std::vector<std::string>{"abc", ""}));
  EXPECT_FALSE(run.stopped);
  EXPECT_EQ(run.text, "abcz");
}

TEST(StopStringMatcher, StopsSplitInsideUtf8Sequences) {
  const std::string stop = "\xC3\xA9!";  // "é!"
  const Streamed run = feed_all({stop}, {"caf\xC3", "\xA9", "! rest"});
  EXPECT_EQ(run.emitted, (std::vector<std::string>{"caf", "", ""}));
  EXPECT_EQ(run.text, "caf");
  // Every byte cut of a text with multi-byte characters on both sides of the stop.
  const std::string text = "\xE4\xBD\xA0\xE5\xA5\xBD caf\xC3\xA9! \xE2\x82\xAC";
  EXPECT_EQ(feed_all({stop}, bytes_of(text)).text, "\xE4\xBD\xA0\xE5\xA5\xBD caf");
  // The same first byte, then a different character: nothing is lost.
  EXPECT_EQ(feed_all({"\xC3\xA9x"}, {"\xC3", "\xA9y"}).text, "\xC3\xA9y");
}

TEST(StopStringMatcher, NeverEmitsACharacterCutShort) {
  StopStringMatcher matcher({});
  EXPECT_EQ(matcher.feed("a\xE2\x82"), "a");  // the euro sign, two of its three bytes
  EXPECT_EQ(matcher.feed("\xAC"), "\xE2\x82\xAC");
  EXPECT_EQ(matcher.feed("\xF0\x9F"), "");
  EXPECT_EQ(matcher.flush(), "\xF0\x9F");  // the end of generation gives back what is left
}

}  // namespace
}  // namespace sluice::runtime
