// Every rank state has its lowercase name; values outside the enum (a newer peer's) fall back to
// the caller's word.
#include "proto/rank_state.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace tandem {
namespace {

TEST(RankStateTest, EveryStateHasItsName) {
  const std::pair<v1::RankState, std::string> cases[] = {
      {v1::RANK_STATE_IDLE, "idle"},       {v1::RANK_STATE_LOADING, "loading"}, {v1::RANK_STATE_LOADED, "loaded"},
      {v1::RANK_STATE_JOINING, "joining"}, {v1::RANK_STATE_READY, "ready"},     {v1::RANK_STATE_SERVING, "serving"},
      {v1::RANK_STATE_FAILED, "failed"}};
  std::set<std::string> names;
  for (const auto& [state, name] : cases) {
    EXPECT_EQ(RankStateName(state), name);
    names.insert(name);
  }
  // A state added to agent.proto without a name here would print as "unspecified".
  for (int v = v1::RankState_MIN; v <= v1::RankState_MAX; ++v) {
    if (!v1::RankState_IsValid(v) || v == v1::RANK_STATE_UNSPECIFIED) continue;
    EXPECT_TRUE(names.count(RankStateName(static_cast<v1::RankState>(v)))) << v1::RankState_Name(v);
  }
}

TEST(RankStateTest, UnknownValuesUseTheCallersWord) {
  EXPECT_STREQ(RankStateName(v1::RANK_STATE_UNSPECIFIED), "unspecified");
  EXPECT_STREQ(RankStateName(v1::RANK_STATE_UNSPECIFIED, "-"), "-");
  EXPECT_STREQ(RankStateName(static_cast<v1::RankState>(v1::RankState_MAX + 1)), "unspecified");
  EXPECT_STREQ(RankStateName(static_cast<v1::RankState>(v1::RankState_MAX + 1), "?"), "?");
}

}  // namespace
}  // namespace tandem
