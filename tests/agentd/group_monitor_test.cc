// Every rule of DecideGroupHealth (agentd/group_monitor.h), one table row each, with hand-built
// observations and a fixed clock.
#include "agentd/group_monitor.h"

#include <gtest/gtest.h>

#include <functional>
#include <vector>

namespace tandem::agentd {
namespace {

using namespace std::chrono_literals;
using Clock = GroupObservation::Clock;

const Clock::time_point kT0 = Clock::time_point() + 1000s;

// A healthy worker of generation 5 whose poll this time read "5" from a store that answers.
GroupObservation Healthy() {
  GroupObservation o;
  o.now = kT0;
  o.generation = 5;
  o.generation_read = true;
  o.store_last_reached = kT0;
  o.head_lost_after = 3000ms;
  o.generation_value = "5";
  return o;
}

struct Row {
  const char* name;
  std::function<void(GroupObservation&)> observe;
  bool failed;
  const char* reason;  // the whole reason ("" when not failed)
};

TEST(GroupMonitorTest, EveryRuleOfTheDecision) {
  const std::vector<Row> rows = {
      {"healthy", [](GroupObservation&) {}, false, ""},
      {"settled groups report nothing more, whatever else is seen",
       [](GroupObservation& o) {
         o.settled = true;
         o.engine_failed = true;
         o.lost_peer = std::make_pair(1, 4000ms);
         o.generation_value.reset();
       },
       false, ""},
      {"the head's engine failed (ahead of a lost peer)",
       [](GroupObservation& o) {
         o.engine_failed = true;
         o.engine_error = absl::UnavailableError("allreduce: peer closed the connection");
         o.lost_peer = std::make_pair(1, 4000ms);
       },
       true, "engine failed: allreduce: peer closed the connection"},
      {"a worker's heartbeat is silent (ahead of the generation poll)",
       [](GroupObservation& o) {
         o.lost_peer = std::make_pair(2, 3004ms);
         o.generation_value = "9";
       },
       true, "rank 2 lost: no heartbeat for 3004 ms (generation 5)"},
      {"no poll due: a gone generation key is not looked at",
       [](GroupObservation& o) {
         o.generation_read = false;
         o.generation_value.reset();
       },
       false, ""},
      {"the head's store unreachable for head_lost_after",
       [](GroupObservation& o) {
         o.store_error = absl::UnavailableError("connection refused");
         o.store_last_reached = kT0 - 3000ms;
         o.generation_value.reset();
       },
       true, "head lost: its store has been unreachable for 3.000000 s (connection refused)"},
      {"the head's store unreachable for less: the next poll retries",
       [](GroupObservation& o) {
         o.store_error = absl::DeadlineExceededError("deadline");
         o.store_last_reached = kT0 - 2999ms;
         o.generation_value.reset();
       },
       false, ""},
      {"the store forgot the generation (head agent restarted)",
       [](GroupObservation& o) { o.generation_value.reset(); }, true,
       "head lost: its store no longer knows generation 5 (the head agent restarted?)"},
      {"the store holds a newer generation",
       [](GroupObservation& o) { o.generation_value = "6"; }, true,
       "stale generation: the group moved on to generation 6; this rank was in 5 and aborted itself"},
      {"the store holds an older generation (the head writes its own first)",
       [](GroupObservation& o) { o.generation_value = "4"; }, false, ""},
  };
  for (const Row& row : rows) {
    GroupObservation o = Healthy();
    row.observe(o);
    const GroupVerdict v = DecideGroupHealth(o);
    EXPECT_EQ(v.failed, row.failed) << row.name;
    EXPECT_EQ(v.reason, row.reason) << row.name;
  }
}

}  // namespace
}  // namespace tandem::agentd
