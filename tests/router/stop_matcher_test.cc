#include "router/stop_matcher.h"

#include <gtest/gtest.h>

namespace tandem::router {
namespace {

// Feeds pieces and returns (emitted text, stopped).
std::pair<std::string, bool> Feed(std::vector<std::string> stops, std::vector<std::string> pieces) {
  StopMatcher matcher(std::move(stops));
  std::string out;
  for (const auto& p : pieces) {
    StopMatcher::Output o = matcher.Add(p);
    out += o.text;
    if (o.stopped) return {out, true};
  }
  return {out + matcher.Finish(), false};
}

TEST(StopMatcherTest, MatchesAcrossPieces) {
  auto [text, stopped] = Feed({"STOP"}, {"Hello S", "T", "OP world"});
  EXPECT_EQ(text, "Hello ");
  EXPECT_TRUE(stopped);
}

TEST(StopMatcherTest, HoldsBackPossiblePrefixThenReleases) {
  StopMatcher matcher({"STOP"});
  EXPECT_EQ(matcher.Add("abcST").text, "abc");
  EXPECT_EQ(matcher.Add("X").text, "STX");
  EXPECT_EQ(matcher.Add("S").text, "");
  EXPECT_EQ(matcher.Finish(), "S");
}

TEST(StopMatcherTest, EarliestOfSeveralStopsWins) {
  auto [text, stopped] = Feed({"world", "lo"}, {"Hello world"});
  EXPECT_EQ(text, "Hel");
  EXPECT_TRUE(stopped);
}

TEST(StopMatcherTest, NoStopsPassesEverything) {
  auto [text, stopped] = Feed({}, {"a", "b", "c"});
  EXPECT_EQ(text, "abc");
  EXPECT_FALSE(stopped);
}

TEST(StopMatcherTest, OverlappingPrefixStops) {
  // "aab" must be found although "aa" alone was a candidate prefix.
  auto [text, stopped] = Feed({"aab"}, {"xa", "a", "a", "b", "tail"});
  EXPECT_EQ(text, "xa");
  EXPECT_TRUE(stopped);
}

TEST(StopMatcherTest, MultibyteStopString) {
  auto [text, stopped] = Feed({"\xC3\xA9t\xC3\xA9"}, {"caf\xC3\xA9", " \xC3\xA9", "t\xC3\xA9!"});
  EXPECT_EQ(text, "caf\xC3\xA9 ");
  EXPECT_TRUE(stopped);
}

}  // namespace
}  // namespace tandem::router
