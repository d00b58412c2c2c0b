// Stop strings over streamed text: held-back prefixes, cuts at the earliest stop string, and a
// stop string split across many pieces.
#include "engine/batching/stop_strings.h"

#include <cstdio>

#include <gtest/gtest.h>

namespace tandem::engine {
namespace {

// Feeds `pieces`; returns the emitted text (plus Flush when no stop was found) and whether it stopped.
std::pair<std::string, bool> Feed(std::vector<std::string> stops, const std::vector<std::string>& pieces,
                                 std::vector<std::string>* emitted = nullptr) {
  StopStringMatcher m(std::move(stops));
  std::string out;
  for (const auto& p : pieces) {
    bool stopped = false;
    const std::string e = m.Push(p, &stopped);
    if (emitted != nullptr) emitted->push_back(e);
    out += e;
    if (stopped) return {out, true};
  }
  return {out + m.Flush(), false};
}

TEST(StopStringsTest, NoStopsPassesThrough) {
  std::vector<std::string> emitted;
  auto [text, stopped] = Feed({}, {"Hel", "lo"}, &emitted);
  EXPECT_EQ(text, "Hello");
  EXPECT_FALSE(stopped);
  EXPECT_EQ(emitted, (std::vector<std::string>{"Hel", "lo"}));
}

TEST(StopStringsTest, HoldsBackAPossibleStart) {
  std::vector<std::string> emitted;
  auto [text, stopped] = Feed({"END"}, {"abc E", "N", "x"}, &emitted);
  EXPECT_FALSE(stopped);
  EXPECT_EQ(text, "abc ENx");
  // "E" and "EN" could begin "END": held until "x" shows they do not.
  EXPECT_EQ(emitted, (std::vector<std::string>{"abc ", "", "ENx"}));
}

TEST(StopStringsTest, CutsAtSplitStopString) {
  std::vector<std::string> emitted;
  auto [text, stopped] = Feed({"</s>"}, {"one <", "/", "s", "> two"}, &emitted);
  EXPECT_TRUE(stopped);
  EXPECT_EQ(text, "one ");
  std::printf("emitted:");
  for (const auto& e : emitted) std::printf(" [%s]", e.c_str());
  std::printf("\n");
}

TEST(StopStringsTest, EarliestOfSeveralWins) {
  auto [text, stopped] = Feed({"world", "lo w"}, {"hello world"});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(text, "hel");
}

TEST(StopStringsTest, EndFlushesHeldText) {
  auto [text, stopped] = Feed({"STOP"}, {"ab", "ST", "O"});
  EXPECT_FALSE(stopped);
  EXPECT_EQ(text, "abSTO");
}

TEST(StopStringsTest, MultiByteStopString) {
  auto [text, stopped] = Feed({"\xC3\xA9t\xC3\xA9"}, {"un \xC3\xA9", "t", "\xC3\xA9 chaud"});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(text, "un ");
}

}  // namespace
}  // namespace tandem::engine
