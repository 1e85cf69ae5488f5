#include "router/stop_matcher.h"

#include <gtest/gtest.h>

#include <random>

namespace tandem::router {
namespace {

// Feeds pieces and returns (emitted text, stopped).
std::pair<std::string, bool> Feed(std::vector<std::string> stops, std::vector<std::string> pieces,
                                  bool include = false) {
  StopMatcher matcher(std::move(stops), include);
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

TEST(StopMatcherTest, IncludeInOutputKeepsTheStopStringAndHoldsNothingBack) {
  auto [text, stopped] = Feed({"STOP"}, {"Hello S", "T", "OP world"}, /*include=*/true);
  EXPECT_EQ(text, "Hello STOP");
  EXPECT_TRUE(stopped);
  StopMatcher matcher({"STOP"}, /*include_in_output=*/true);
  EXPECT_EQ(matcher.Add("abcST").text, "abcST");  // a prefix goes out at once: it is output either way
  StopMatcher::Output o = matcher.Add("OPxyz");
  EXPECT_EQ(o.text, "OP");
  EXPECT_TRUE(o.stopped);
}

TEST(StopMatcherTest, TheMatchThatEndsFirstWinsWhateverThePieces) {
  // "bc" completes before "abcd" does, so a token-by-token stream stops there; one big piece must too.
  EXPECT_EQ(Feed({"abcd", "bc"}, {"abcd"}).first, "a");
  EXPECT_EQ(Feed({"abcd", "bc"}, {"a", "b", "c", "d"}).first, "a");
  EXPECT_EQ(Feed({"abcd", "bc"}, {"abcd"}, true).first, "abc");
  // Two ending together: the longer one (it started first).
  EXPECT_EQ(Feed({"c", "abc"}, {"xabc"}).first, "x");
}

TEST(StopMatcherTest, NoMatchEndsInTextThatCannotStopButOneStartingThereCounts) {
  for (bool include : {false, true}) {
    StopMatcher matcher({"STOP"}, include);
    StopMatcher::Output early = matcher.Add("aSTOPxST", /*can_stop=*/false);  // min_tokens not reached
    EXPECT_EQ(early.text, include ? "aSTOPxST" : "aSTOPx");                   // "ST" may become STOP
    EXPECT_FALSE(early.stopped);
    StopMatcher::Output later = matcher.Add("OPz");
    EXPECT_TRUE(later.stopped);
    EXPECT_EQ(later.text, include ? "OP" : "");
  }
  // A stop string held back while it could not stop does not match later by itself.
  StopMatcher matcher({"STOP", "TO"});
  EXPECT_EQ(matcher.Add("xSTO", false).text, "x");
  EXPECT_EQ(matcher.Add("Z").text, "STOZ");
}

// What a reader of the whole text would say: the stop string that completes first
// (ties: the longer), text before it or through it; nothing may end before `free_bytes`.
std::pair<std::string, bool> Reference(const std::vector<std::string>& stops, const std::string& text, bool include,
                                       size_t free_bytes) {
  for (size_t end = free_bytes + 1; end <= text.size(); ++end) {
    size_t best = std::string::npos;
    for (const std::string& s : stops) {
      if (s.size() <= end && text.compare(end - s.size(), s.size(), s) == 0) best = std::min(best, end - s.size());
    }
    if (best != std::string::npos) return {text.substr(0, include ? end : best), true};
  }
  return {text, false};
}

TEST(StopMatcherTest, RandomPiecesMatchTheWholeTextReference) {
  std::mt19937 rng(7);
  auto word = [&](int max_len) {
    std::string w(1 + rng() % max_len, 'a');
    for (char& c : w) c = "abc"[rng() % 3];
    return w;
  };
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<std::string> stops;
    for (int i = rng() % 3; i >= 0; --i) stops.push_back(word(4));
    const std::string text = word(24);
    const bool include = rng() % 2 == 0;
    const size_t free_bytes = rng() % 3 == 0 ? rng() % text.size() : 0;
    StopMatcher matcher(stops, include);
    std::string out;
    bool stopped = false;
    for (size_t pos = 0; pos < text.size() && !stopped;) {
      // A piece never straddles the can-stop boundary (pieces are tokens; min_tokens counts tokens).
      size_t len = 1 + rng() % 5;
      if (pos < free_bytes) len = std::min(len, free_bytes - pos);
      len = std::min(len, text.size() - pos);
      StopMatcher::Output o = matcher.Add(text.substr(pos, len), pos + len > free_bytes);
      out += o.text;
      stopped = o.stopped;
      pos += len;
    }
    if (!stopped) out += matcher.Finish();
    auto [want, want_stopped] = Reference(stops, text, include, free_bytes);
    ASSERT_EQ(stopped, want_stopped) << text << " include " << include << " free " << free_bytes;
    ASSERT_EQ(out, want) << text << " include " << include << " free " << free_bytes;
  }
}

}  // namespace
}  // namespace tandem::router
