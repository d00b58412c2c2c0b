// Orchestration pieces without a network: the new cluster.yaml keys (good and bad, with
// file:line: key errors), the plan, the status JSON and the controller state file.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/status.h"
#include "controller/cluster_plan.h"
#include "controller/cluster_spec.h"
#include "controller/controller_state.h"
#include "controller/status_command.h"

namespace tandem::controller {
namespace {

constexpr char kFull[] = R"(cluster: pair
model:
  path: /models/q
  served_name: qwen3
engine:
  backend: cuda
  kv_tokens: 65536
  max_num_seqs: 32
  max_model_len: 8192
api:
  listen: 0.0.0.0:8000
  key_file: /etc/tandem/api.key
  max_body_bytes: 1048576
auth:
  token_file: /etc/tandem/token
probe:
  prompt: "2+2="
  expect: "4"
  max_tokens: 4
  interval: 45s
  timeout: 500ms
serve:
  restart_budget: 5 per 30m
  metrics_listen: 127.0.0.1:9500
  stuck_after: 90s
timeouts:
  load: 1h
  join: 2m
nccl:
  socket_ifname: enp1s0f0np0
nodes:
  - name: spark1
    agent: 10.0.0.1:9300
  - name: spark2
    agent: 10.0.0.2:9300
)";

TEST(OrchestrationKeys, ParsesEveryNewKey) {
  auto spec = ParseClusterSpec(kFull, "c.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->engine_backend, "cuda");
  EXPECT_EQ(spec->engine_kv_tokens, 65536);
  EXPECT_EQ(spec->engine_max_num_seqs, 32);
  EXPECT_EQ(spec->engine_max_model_len, 8192);
  EXPECT_EQ(spec->model_served_name, "qwen3");
  EXPECT_EQ(spec->api_listen, "0.0.0.0:8000");
  EXPECT_EQ(spec->api_key_file, "/etc/tandem/api.key");
  EXPECT_EQ(spec->api_max_body_bytes, 1048576);
  EXPECT_EQ(spec->auth_token_file, "/etc/tandem/token");
  EXPECT_EQ(spec->probe.prompt, "2+2=");
  EXPECT_EQ(spec->probe.expect, "4");
  EXPECT_TRUE(spec->probe.prompt_ids.empty());
  EXPECT_EQ(spec->probe.max_tokens, 4);
  EXPECT_EQ(spec->probe.interval, std::chrono::seconds(45));
  EXPECT_EQ(spec->probe.timeout, std::chrono::milliseconds(500));
  EXPECT_EQ(spec->serve.restart_budget, 5);
  EXPECT_EQ(spec->serve.restart_window, std::chrono::minutes(30));
  EXPECT_EQ(spec->serve.metrics_listen, "127.0.0.1:9500");
  EXPECT_EQ(spec->serve.stuck_after, std::chrono::seconds(90));
  EXPECT_EQ(spec->timeouts.load, std::chrono::hours(1));
  EXPECT_EQ(spec->timeouts.join, std::chrono::minutes(2));
  EXPECT_EQ(spec->timeouts.status, std::chrono::seconds(2));  // default
}

TEST(OrchestrationKeys, Defaults) {
  auto spec = ParseClusterSpec("model: {path: /m}\nnodes:\n  - {name: a, agent: 'h:1'}\n", "c.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->engine_max_num_seqs, 16);
  EXPECT_EQ(spec->probe.max_tokens, 8);
  EXPECT_EQ(spec->probe.interval, std::chrono::seconds(30));
  EXPECT_EQ(spec->serve.restart_budget, 3);
  EXPECT_EQ(spec->serve.restart_window, std::chrono::minutes(10));
}

void ExpectError(const std::string& extra, const std::string& want_prefix) {
  std::string yaml = "model: {path: /m}\nnodes:\n  - {name: a, agent: 'h:1'}\n" + extra;
  auto spec = ParseClusterSpec(yaml, "c.yaml");
  ASSERT_FALSE(spec.ok()) << "parsed but should not:\n" << yaml;
  std::string msg = StatusText(spec.status());
  std::printf("  error: %s\n", msg.c_str());
  EXPECT_EQ(msg.substr(0, want_prefix.size()), want_prefix) << msg;
}

TEST(OrchestrationKeys, BadValuesNameFileLineKey) {
  ExpectError("engine:\n  backend: rocm\n", "c.yaml:5: engine.backend: expected cpu or cuda");
  ExpectError("engine:\n  kv_tokens: -5\n", "c.yaml:5: engine.kv_tokens: expected 0..");
  ExpectError("engine:\n  max_num_seqs: lots\n", "c.yaml:5: engine.max_num_seqs: expected a whole number");
  ExpectError("api:\n  listen: 8000\n", "c.yaml:5: api.listen: expected HOST:PORT");
  ExpectError("api:\n  max_body_bytes: -1\n", "c.yaml:5: api.max_body_bytes: expected 0..");
  ExpectError("probe:\n  interval: often\n", "c.yaml:5: probe.interval: expected a duration");
  ExpectError("probe:\n  max_tokens: 0\n", "c.yaml:5: probe.max_tokens: expected 1..4096");
  ExpectError("probe:\n  prompt: \"\"\n", "c.yaml:5: probe.prompt: expected a non-empty prompt");
  ExpectError("serve:\n  restart_budget: 3 every 10m\n", "c.yaml:5: serve.restart_budget: expected \"N per DURATION\"");
  ExpectError("serve:\n  metrics_listen: nohost\n", "c.yaml:5: serve.metrics_listen: expected HOST:PORT");
  ExpectError("timeouts:\n  lod: 5s\n", "c.yaml:5: timeouts.lod: unknown key (did you mean \"load\"?)");
  ExpectError("probe:\n  prompt_ids: [1, x]\n", "c.yaml:5: probe.prompt_ids[1]: expected a token id");
  ExpectError("probe:\n  prompt_ids: []\n", "c.yaml:5: probe.prompt_ids: expected at least one token id");
  ExpectError("timeouts:\n  join: 0s\n", "c.yaml:5: timeouts.join: expected a duration");
}

TEST(OrchestrationKeys, PromptIds) {
  auto spec = ParseClusterSpec("model: {path: /m}\nprobe:\n  prompt_ids: [1, 22, 333]\nnodes:\n  - {name: a, agent: 'h:1'}\n", "c.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->probe.prompt_ids, (std::vector<int32_t>{1, 22, 333}));
}

TEST(OrchestrationKeys, ParseDuration) {
  std::chrono::milliseconds d{0};
  EXPECT_TRUE(ParseDuration("250ms", &d));
  EXPECT_EQ(d.count(), 250);
  EXPECT_TRUE(ParseDuration("1.5s", &d));
  EXPECT_EQ(d.count(), 1500);
  EXPECT_TRUE(ParseDuration("2", &d));
  EXPECT_EQ(d.count(), 2000);
  EXPECT_TRUE(ParseDuration("10m", &d));
  EXPECT_EQ(d.count(), 600000);
  EXPECT_FALSE(ParseDuration("", &d));
  EXPECT_FALSE(ParseDuration("s", &d));
  EXPECT_FALSE(ParseDuration("5 s", &d));
  EXPECT_FALSE(ParseDuration("3d", &d));
  EXPECT_FALSE(ParseDuration("-1s", &d));
}

TEST(ClusterPlan, RanksGenerationStoreAndCommEnv) {
  auto spec = ParseClusterSpec(kFull, "c.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  PreflightReport report;
  report.nccl_env["spark1"] = {{"NCCL_SOCKET_IFNAME", "enp1s0f0np0"}, {"NCCL_IB_GID_INDEX", "3"}};
  report.nccl_env["spark2"] = {{"NCCL_SOCKET_IFNAME", "enp1s0f0np0"}, {"NCCL_IB_GID_INDEX", "3"}};
  auto plan = MakeClusterPlan(*spec, report, 41, "sk-test");
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::printf("%s", DescribePlan(*plan).c_str());
  EXPECT_EQ(plan->generation, 42u);
  EXPECT_EQ(plan->store_endpoint, "10.0.0.1:9300");
  ASSERT_EQ(plan->ranks.size(), 2u);
  EXPECT_EQ(plan->ranks[0].node, "spark1");
  EXPECT_EQ(plan->ranks[1].join.rank(), 1u);
  EXPECT_EQ(plan->ranks[1].join.world_size(), 2u);
  EXPECT_EQ(plan->ranks[1].join.comm_host(), "enp1s0f0np0");  // socket_ifname set: bind to it
  EXPECT_EQ(plan->ranks[1].join.comm_env().env().at("NCCL_IB_GID_INDEX"), "3");
  EXPECT_EQ(plan->ranks[0].join.api_listen(), "0.0.0.0:8000");
  EXPECT_EQ(plan->ranks[0].join.api_key(), "sk-test");
  EXPECT_EQ(plan->ranks[0].join.api_max_body_bytes(), 1048576u);
  EXPECT_EQ(plan->ranks[1].join.api_listen(), "");  // workers serve no API
  EXPECT_EQ(plan->ranks[0].load.backend(), "cuda");
  EXPECT_EQ(plan->ranks[0].load.generation(), 42u);
}

TEST(ClusterPlan, CommHostIsTheAgentHostWithoutIfname) {
  auto spec = ParseClusterSpec("model: {path: /m}\nnodes:\n  - {name: a, agent: '127.0.0.1:1'}\n  - {name: b, agent: 'h2:2'}\n",
                               "c.yaml");
  ASSERT_TRUE(spec.ok());
  auto plan = MakeClusterPlan(*spec, PreflightReport{}, 0, "");
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->generation, 1u);
  EXPECT_EQ(plan->ranks[0].join.comm_host(), "127.0.0.1");
  EXPECT_EQ(plan->ranks[1].join.comm_host(), "h2");
  EXPECT_EQ(plan->ranks[0].load.backend(), "cpu");  // default
}

TEST(ClusterPlan, ReplicasAreRefused) {
  auto spec = ParseClusterSpec(
      "model: {path: /m}\nparallel: {tensor: 1}\nnodes:\n  - {name: a, agent: 'h:1'}\n  - {name: b, agent: 'h:2'}\n", "c.yaml");
  ASSERT_TRUE(spec.ok());
  auto plan = MakeClusterPlan(*spec, PreflightReport{}, 0, "");
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kUnimplemented);
}

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
