// controller/fabric_check.h over a fake of the agents: what each rank is asked (the plan's rank,
// store and comm environment, one check id for all), the worst figures, thresholds and failed
// ranks as problems, and the table and JSON an operator reads.
#include "controller/fabric_check.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "absl/strings/str_split.h"

namespace tandem::controller {
namespace {

// Every agent answers CheckFabric from `answers` (by address) and records the request.
class FabricAgents final : public ClusterAgents {
 public:
  std::map<std::string, absl::StatusOr<v1::CheckFabricResponse>> answers;
  std::mutex mu;
  std::map<std::string, v1::CheckFabricRequest> asked;
  std::map<std::string, std::chrono::milliseconds> deadlines;

  std::unique_ptr<NodeControl> Control(const std::string& agent) override {
    return std::make_unique<Node>(this, agent);
  }
  std::vector<NodeObservation> Observe(const ClusterSpec&, const ObserveOptions&) override { return {}; }

 private:
  class Node final : public NodeControl {
   public:
    Node(FabricAgents* all, std::string agent) : all_(all), agent_(std::move(agent)) {}
    absl::StatusOr<v1::LoadModelEvent> LoadModel(const v1::LoadModelRequest&, std::chrono::milliseconds,
                                                 const std::function<void(const v1::LoadModelEvent&)>&) override {
      return absl::UnimplementedError("not in this test");
    }
    absl::StatusOr<v1::JoinGroupResponse> JoinGroup(const v1::JoinGroupRequest&, std::chrono::milliseconds) override {
      return absl::UnimplementedError("not in this test");
    }
    absl::Status LeaveGroup(bool, const std::string&, std::chrono::milliseconds) override {
      return absl::UnimplementedError("not in this test");
    }
    absl::Status SetServing(bool, std::chrono::milliseconds) override {
      return absl::UnimplementedError("not in this test");
    }
    absl::StatusOr<v1::GenerateResponse> Generate(const v1::GenerateRequest&, std::chrono::milliseconds) override {
      return absl::UnimplementedError("not in this test");
    }
    absl::StatusOr<v1::RankStatus> GetStatus(std::chrono::milliseconds) override {
      return absl::UnimplementedError("not in this test");
    }
    absl::StatusOr<v1::CheckFabricResponse> CheckFabric(const v1::CheckFabricRequest& req,
                                                        std::chrono::milliseconds timeout) override {
      std::lock_guard<std::mutex> l(all_->mu);
      all_->asked[agent_] = req;
      all_->deadlines[agent_] = timeout;
      return all_->answers.at(agent_);
    }

   private:
    FabricAgents* all_;
    std::string agent_;
  };
};

ClusterPlan TwoRankPlan() {
  ClusterPlan plan;
  plan.store_endpoint = "10.0.0.1:9300";
  for (int i = 0; i < 2; ++i) {
    RankPlan r;
    r.node = i == 0 ? "spark1" : "spark2";
    r.agent = i == 0 ? "10.0.0.1:9300" : "10.0.0.2:9300";
    r.rank = i;
    r.load.set_backend("cuda");
    r.join.set_rank(i);
    r.join.set_world_size(2);
    r.join.set_store_endpoint(plan.store_endpoint);
    r.join.set_comm_host(i == 0 ? "enp1s0f0np0" : "enp1s0f1np1");
    (*r.join.mutable_comm_env()->mutable_env())["NCCL_IB_HCA"] = i == 0 ? "rocep1s0f0" : "rocep1s0f1";
    plan.ranks.push_back(r);
  }
  return plan;
}

v1::CheckFabricResponse Figures(int rank, double median_us, double p99_us, double busbw) {
  v1::CheckFabricResponse f;
  f.set_rank(rank);
  f.set_transport("nccl/ib");
  f.set_device("CUDA device 0");
  f.set_connect_seconds(0.25);
  f.set_small_bytes(4096);
  f.set_small_iters(200);
  f.set_small_median_us(median_us);
  f.set_small_p99_us(p99_us);
  f.set_large_bytes(64 << 20);
  f.set_large_iters(10);
  f.set_large_busbw_gbps(busbw);
  f.set_large_algbw_gbps(busbw);  // n = 2: the same
  f.set_large_median_seconds((64 << 20) / busbw / 1e9);
  return f;
}

TEST(RunFabricCheckTest, EveryRankGetsItsJoinSettingsAndOneCheckId) {
  FabricAgents agents;
  agents.answers["10.0.0.1:9300"] = Figures(0, 20, 35, 22.0);
  agents.answers["10.0.0.2:9300"] = Figures(1, 24, 31, 21.5);
  FabricCheckOptions o;
  o.check_id = 77;
  o.timeout = std::chrono::seconds(5);
  o.measure_budget = std::chrono::seconds(50);
  o.large_bytes = 1 << 20;
  FabricReport rep = RunFabricCheck(TwoRankPlan(), agents, o);
  ASSERT_EQ(agents.asked.size(), 2u);
  const v1::CheckFabricRequest& w = agents.asked["10.0.0.2:9300"];
  EXPECT_EQ(w.check_id(), 77u);
  EXPECT_EQ(agents.asked["10.0.0.1:9300"].check_id(), 77u);
  EXPECT_EQ(w.rank(), 1u);
  EXPECT_EQ(w.world_size(), 2u);
  EXPECT_EQ(w.store_endpoint(), "10.0.0.1:9300");
  EXPECT_EQ(w.comm_host(), "enp1s0f1np1");
  EXPECT_EQ(w.comm_env().env().at("NCCL_IB_HCA"), "rocep1s0f1");
  EXPECT_EQ(w.backend(), "cuda");
  EXPECT_EQ(w.timeout_ms(), 5000u);
  EXPECT_EQ(w.large_bytes(), 1u << 20);
  EXPECT_EQ(w.small_bytes(), 0u);  // the agent's default
  EXPECT_EQ(agents.deadlines["10.0.0.2:9300"], std::chrono::seconds(55));

  EXPECT_TRUE(rep.ok());
  EXPECT_TRUE(FabricVerdict(rep).ok());
  EXPECT_EQ(rep.backend, "cuda");
  EXPECT_EQ(rep.transport, "nccl/ib");
  EXPECT_EQ(rep.latency_median_us, 24);  // the worst rank's
  EXPECT_EQ(rep.latency_p99_us, 35);
  EXPECT_EQ(rep.busbw_gbps, 21.5);       // the slowest rank's
  EXPECT_EQ(rep.ranks[1].node, "spark2");
}

TEST(RunFabricCheckTest, AFailedRankAndMissedThresholdsAreProblems) {
  FabricAgents agents;
  agents.answers["10.0.0.1:9300"] = Figures(0, 120, 300, 3.5);
  agents.answers["10.0.0.2:9300"] = absl::UnavailableError("CheckFabric: unreachable (connection refused)");
  FabricCheckOptions o;
  o.check_id = 5;
  o.min_busbw_gbps = 10;
  o.max_latency_us = 100;
  FabricReport rep = RunFabricCheck(TwoRankPlan(), agents, o);
  ASSERT_EQ(rep.problems.size(), 3u);
  EXPECT_EQ(rep.problems[0], "spark1 (rank 0): bus bandwidth 3.5 GB/s is below fabric_check.min_busbw_gbps 10");
  EXPECT_EQ(rep.problems[1], "spark1 (rank 0): 4 KiB all-reduce median 120.0 us is above fabric_check.max_latency_us 100");
  EXPECT_EQ(rep.problems[2], "spark2 (rank 1): CheckFabric: unreachable (connection refused)");
  absl::Status v = FabricVerdict(rep);
  EXPECT_TRUE(absl::IsFailedPrecondition(v));
  EXPECT_NE(v.message().find("fabric check failed: spark1 (rank 0): bus bandwidth"), std::string::npos) << v;
  EXPECT_EQ(rep.busbw_gbps, 3.5);  // from the rank that answered
}

TEST(FabricReportOutputTest, TableAndJson) {
  FabricAgents agents;
  agents.answers["10.0.0.1:9300"] = Figures(0, 20.04, 35.5, 22.125);
  agents.answers["10.0.0.2:9300"] = absl::DeadlineExceededError(
      "CheckFabric: the agent answered DEADLINE_EXCEEDED: rank 0 of 2 did not join the fabric check within 60.0 s");
  FabricCheckOptions o;
  o.check_id = 9;
  FabricReport rep = RunFabricCheck(TwoRankPlan(), agents, o);
  const std::string table = FormatFabricTable(rep);
  std::printf("%s", table.c_str());
  std::vector<std::string> lines = absl::StrSplit(table, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[0], "fabric check 9: 2 ranks, backend cuda, transport nccl/ib (4 KiB x 200, 64 MiB x 10)");
  EXPECT_EQ(lines[1],
            "RANK  NODE          TRANSPORT      MEDIAN_US       P99_US  BUSBW_GB/S  ALGBW_GB/S  CONNECT_S  RESULT");
  EXPECT_EQ(lines[2],
            "0     spark1        nccl/ib             20.0         35.5      22.125      22.125       0.25  ok");
  EXPECT_EQ(lines[3].substr(0, 21), "1     spark2        -");
  EXPECT_NE(lines[3].find("FAILED: CheckFabric: the agent answered DEADLINE_EXCEEDED: rank 0 of 2 did not join"),
            std::string::npos);
  EXPECT_NE(lines[4].find("NCCL's bus bandwidth"), std::string::npos);
  EXPECT_EQ(lines[5].substr(0, 31), "fabric: FAILED: spark2 (rank 1)");

  nlohmann::json j = FabricReportJson(rep);
  EXPECT_FALSE(j["ok"].get<bool>());
  EXPECT_EQ(j["check_id"], 9);
  EXPECT_EQ(j["world_size"], 2);
  EXPECT_EQ(j["transport"], "nccl/ib");
  EXPECT_EQ(j["busbw_gbps"], 22.125);
  EXPECT_TRUE(j["thresholds"]["min_busbw_gbps"].is_null());
  ASSERT_EQ(j["ranks"].size(), 2u);
  EXPECT_EQ(j["ranks"][0]["small_p99_us"], 35.5);
  EXPECT_EQ(j["ranks"][0]["large_bytes"], 64 << 20);
  EXPECT_EQ(j["ranks"][0]["device"], "CUDA device 0");
  EXPECT_FALSE(j["ranks"][1]["ok"].get<bool>());
  EXPECT_NE(j["ranks"][1]["error"].get<std::string>().find("did not join"), std::string::npos);
  EXPECT_FALSE(j["ranks"][1].contains("busbw_gbps"));
  ASSERT_EQ(j["problems"].size(), 1u);
}

TEST(FabricReportOutputTest, LinktestOutputGainsTheCollectives) {
  FabricAgents agents;
  agents.answers["10.0.0.1:9300"] = Figures(0, 20, 35, 22.0);
  agents.answers["10.0.0.2:9300"] = Figures(1, 24, 31, 21.5);
  FabricReport rep = RunFabricCheck(TwoRankPlan(), agents, FabricCheckOptions{});
  const std::string text = WithCollectives("PASS: 4 halves tested\n", false, &rep);
  EXPECT_EQ(text.rfind("PASS: 4 halves tested\n\nfabric check ", 0), 0u) << text;
  EXPECT_EQ(WithCollectives("PASS\n", false, nullptr), "PASS\n");
  nlohmann::json j = nlohmann::json::parse(WithCollectives(R"({"ok": true, "pairs": []})", true, &rep));
  EXPECT_TRUE(j["ok"].get<bool>());
  EXPECT_TRUE(j["collectives"]["ok"].get<bool>());
  EXPECT_EQ(j["collectives"]["busbw_gbps"], 21.5);
  nlohmann::json skipped = nlohmann::json::parse(WithCollectives(R"({"ok": true})", true, nullptr));
  EXPECT_TRUE(skipped["collectives"].is_null());
}

TEST(FabricReportOutputTest, OptionsFromClusterYaml) {
  FabricCheckSpec spec;
  spec.enabled = true;
  spec.min_busbw_gbps = 40;
  spec.timeout = std::chrono::seconds(12);
  FabricCheckOptions o = FabricCheckOptionsFromSpec(spec);
  EXPECT_EQ(*o.min_busbw_gbps, 40);
  EXPECT_FALSE(o.max_latency_us.has_value());
  EXPECT_EQ(o.timeout, std::chrono::seconds(12));
}

}  // namespace
}  // namespace tandem::controller
