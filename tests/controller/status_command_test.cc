// `tandemctl status`: the JSON shape and the table, serve's restart budget included (no network).
#include "controller/status_command.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "controller/controller_state.h"

namespace tandem::controller {
namespace {

TEST(StatusJson, ExactShape) {
  ObservedState obs;
  ObservedRank head;
  head.name = "local1";
  head.reachable = true;
  head.state = v1::RANK_STATE_SERVING;
  head.generation = 3;
  head.rank = 0;
  head.kv_tokens = 2048;
  head.iterations = 17;
  ObservedRank worker = head;
  worker.name = "local2";
  worker.rank = 1;
  obs.nodes = {head, worker};
  std::vector<v1::RankStatus> raw(2);
  raw[0].set_transport("gloo/tcp");
  ProbeRecord probe{true, 3, 1700000000000, 0.25, "ok"};
  nlohmann::json j = nlohmann::json::parse(FormatStatusJson({"127.0.0.1:1", "127.0.0.1:2"}, obs, raw, probe));
  std::printf("%s\n", j.dump().c_str());
  EXPECT_EQ(j["state"], "serving");
  ASSERT_EQ(j["nodes"].size(), 2u);
  for (const char* k : {"name", "state", "rank", "generation", "reachable", "kv_tokens", "iterations", "queue_depth",
                        "last_probe"}) {
    EXPECT_TRUE(j["nodes"][0].contains(k)) << k;
  }
  EXPECT_EQ(j["nodes"][0]["last_probe"]["ok"], true);
  EXPECT_TRUE(j["nodes"][1]["last_probe"].is_null());
  obs.nodes[1].reachable = false;
  j = nlohmann::json::parse(FormatStatusJson({}, obs, raw, std::nullopt));
  EXPECT_EQ(j["state"], "degraded");
  EXPECT_EQ(j["nodes"][1]["state"], "unreachable");
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
