// `tandemctl status`: the JSON shape and the table, serve's restart budget included (no network).
#include "controller/status_command.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "absl/strings/str_split.h"
#include "controller/controller_state.h"

namespace tandem::controller {
namespace {

// local1 (rank 0) and local2 (rank 1), both serving generation 3 with 2048 KV tokens.
ObservedState TwoServingRanks() {
  ObservedRank head;
  head.name = "local1";
  head.reachable = true;
  head.state = v1::RANK_STATE_SERVING;
  head.generation = 3;
  head.rank = 0;
  head.kv_tokens = 2048;
  head.iterations = 17;
  head.queue_depth = 2;
  ObservedRank worker = head;
  worker.name = "local2";
  worker.rank = 1;
  ObservedState obs;
  obs.nodes = {head, worker};
  return obs;
}

TEST(StatusJson, ExactShape) {
  ObservedState obs = TwoServingRanks();
  std::vector<v1::RankStatus> raw(2);
  raw[0].set_transport("gloo/tcp");
  raw[0].set_state_slots(64);  // a hybrid model's head; the worker reports none
  ProbeRecord probe{true, 3, 1700000000000, 0.25, "ok"};
  nlohmann::json j = nlohmann::json::parse(FormatStatusJson({"127.0.0.1:1", "127.0.0.1:2"}, obs, raw, probe));
  std::printf("%s\n", j.dump().c_str());
  EXPECT_EQ(j["state"], "serving");
  ASSERT_EQ(j["nodes"].size(), 2u);
  for (const char* k : {"name", "state", "rank", "generation", "reachable", "kv_tokens", "state_slots", "iterations",
                        "queue_depth", "last_probe"}) {
    EXPECT_TRUE(j["nodes"][0].contains(k)) << k;
  }
  EXPECT_EQ(j["nodes"][0]["last_probe"]["ok"], true);
  EXPECT_TRUE(j["nodes"][1]["last_probe"].is_null());
  EXPECT_EQ(j["nodes"][0]["state_slots"], 64);
  EXPECT_EQ(j["nodes"][1]["state_slots"], 0);
  obs.nodes[1].reachable = false;
  j = nlohmann::json::parse(FormatStatusJson({}, obs, raw, std::nullopt));
  EXPECT_EQ(j["state"], "degraded");
  EXPECT_EQ(j["nodes"][1]["state"], "unreachable");
  // Without the agents' raw answers there is nothing to report: 0, the key still there.
  j = nlohmann::json::parse(FormatStatusJson({}, obs, {}, std::nullopt));
  EXPECT_EQ(j["nodes"][0]["state_slots"], 0);
}

// The table has a STATE_SLOTS column after KV_TOKENS: the head's 64, the worker's 0.
TEST(StatusTable, StateSlotsBesideKvTokens) {
  ObservedState obs = TwoServingRanks();
  std::vector<v1::RankStatus> raw(2);
  raw[0].set_state_slots(64);
  std::string table = FormatStatusTable({"127.0.0.1:1", "127.0.0.1:2"}, obs, raw, std::nullopt);
  std::printf("%s", table.c_str());
  std::vector<std::string> lines = absl::StrSplit(table, '\n');
  ASSERT_GE(lines.size(), 3u);
  using Words = std::vector<std::string>;
  const Words header = absl::StrSplit(lines[0], ' ', absl::SkipEmpty());
  EXPECT_EQ(header, (Words{"NODE", "AGENT", "STATE", "RANK", "GEN", "KV_TOKENS", "STATE_SLOTS", "ITERS", "QUEUE",
                           "REASON"}));
  const Words head_row = absl::StrSplit(lines[1], ' ', absl::SkipEmpty());
  EXPECT_EQ(head_row, (Words{"local1", "127.0.0.1:1", "serving", "0", "3", "2048", "64", "17", "2"}));
  const Words worker_row = absl::StrSplit(lines[2], ' ', absl::SkipEmpty());
  EXPECT_EQ(worker_row, (Words{"local2", "127.0.0.1:2", "serving", "1", "3", "2048", "0", "17", "2"}));
}

// `status` shows serve's budget from the state file, counting only attempts inside the window.
TEST(StatusJson, ServeBudgetAndWaitingReason) {
  ServeRecord record;
  const int64_t now = 1'700'000'000'000;
  record.restarts = {{now - 700'000, false, "failed in join"}, {now - 20'000, true, "serving generation 7"}};
  record.waiting = "agent_unreachable";
  record.waiting_detail = "unreachable: local2 (connection refused)";
  record.waiting_since_unix_ms = now - 3'000;
  ServeSpec budget;  // 3 per 10m
  std::optional<ServeSummary> serve = SummarizeServe(record, budget, now);
  ASSERT_TRUE(serve.has_value());
  ObservedState obs;
  obs.nodes.resize(2);
  nlohmann::json j = nlohmann::json::parse(FormatStatusJson({}, obs, {}, std::nullopt, serve));
  std::printf("%s\n", j["serve"].dump().c_str());
  EXPECT_EQ(j["serve"]["attempts_in_window"], 1);
  EXPECT_EQ(j["serve"]["restart_budget"], 3);
  EXPECT_EQ(j["serve"]["restart_window_s"], 600);
  EXPECT_EQ(j["serve"]["waiting"], "agent_unreachable");
  EXPECT_EQ(j["serve"]["attempts"][0]["detail"], "serving generation 7");
  std::string table = FormatStatusTable({}, obs, {}, std::nullopt, serve);
  std::printf("%s", table.c_str());
  EXPECT_NE(table.find("serve: restart budget 1 of 3 used in the last 600 s; waiting: agent_unreachable"),
            std::string::npos);
  EXPECT_FALSE(SummarizeServe(std::nullopt, budget, now).has_value());
  EXPECT_TRUE(nlohmann::json::parse(FormatStatusJson({}, obs, {}, std::nullopt))["serve"].is_null());
}

}  // namespace
}  // namespace tandem::controller
