// The group's own collectives (issue 19, docs/linktest.md "Collectives") on the loopback CPU
// cluster (two real tandem-agentd processes, token + mutual TLS, Gloo over 127.0.0.1; fixture:
// loopback_cluster.h): `up` with `fabric_check: true` reports the figures before it loads, a missed
// threshold stops `up` with nothing loaded, `linktest` adds them after its transfers (and leaves
// them out with --no-collectives), and a rank whose agent never comes is named at the check's
// deadline (the controller's RunFabricCheck in this process against the real agents).
#include <gtest/gtest.h>

#include <chrono>
#include <sstream>

#include "controller/cluster_ops.h"
#include "controller/fabric_check.h"
#include "tests/integration/loopback_cluster.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using testing::CtlResult;

class FabricCheckIntegration : public testing::LoopbackCluster {
 protected:
  // The test cluster with `fabric` (a top-level `fabric_check:` line) appended.
  fs::path ClusterWith(const std::string& fabric) {
    fs::path cluster = WriteCluster("token");
    testing::WriteTextFile(cluster.string(), Read(cluster) + fabric + "\n");
    return cluster;
  }
  // The one-line JSON object `up --json` prints last (progress lines come before it).
  static nlohmann::json LastJsonLine(const std::string& out) {
    std::istringstream lines(out);
    std::string line, last;
    while (std::getline(lines, line)) {
      if (!line.empty() && line[0] == '{') last = line;
    }
    return nlohmann::json::parse(last, nullptr, false);
  }
};

TEST_F(FabricCheckIntegration, UpMeasuresTheCollectivesBeforeItLoads) {
  StartAgent(0);
  StartAgent(1);
  fs::path cluster = ClusterWith("fabric_check: true");
  CtlResult up = Ctl({"up", "-f", cluster.string(), "--json"});
  std::printf("--- tandemctl up --json (exit %d) ---\n%s", up.exit_code, up.out.c_str());
  ASSERT_EQ(up.exit_code, 0);
  // The table came with the progress, between the plan and the first load line.
  const size_t table = up.out.find("RANK  NODE");
  ASSERT_NE(table, std::string::npos);
  EXPECT_LT(table, up.out.find("load n1:"));
  EXPECT_NE(up.out.find("fabric: ok: latency median"), std::string::npos);

  nlohmann::json j = LastJsonLine(up.out);
  ASSERT_TRUE(j.is_object()) << up.out;
  std::vector<std::string> phases;
  for (const auto& p : j["phases"]) phases.push_back(p["phase"]);
  ASSERT_GE(phases.size(), 4u);
  EXPECT_EQ(phases[1], "plan");
  EXPECT_EQ(phases[2], "fabric");
  EXPECT_EQ(phases[3], "load");
  const nlohmann::json& f = j["fabric"];
  EXPECT_TRUE(f["ok"].get<bool>()) << f.dump(2);
  EXPECT_EQ(f["transport"], "gloo/tcp");
  EXPECT_EQ(f["world_size"], 2);
  ASSERT_EQ(f["ranks"].size(), 2u);
  for (const auto& r : f["ranks"]) {
    EXPECT_TRUE(r["ok"].get<bool>()) << r.dump();
    EXPECT_EQ(r["small_bytes"], 4096);
    EXPECT_EQ(r["small_iters"], 200);
    EXPECT_GT(r["small_median_us"].get<double>(), 0);
    EXPECT_GE(r["small_p99_us"].get<double>(), r["small_median_us"].get<double>());
    EXPECT_EQ(r["large_bytes"], 64 << 20);
    EXPECT_GT(r["busbw_gbps"].get<double>(), 0);
    // Two ranks: 2(n-1)/n = 1, so the bus and the algorithm bandwidth are the same figure.
    EXPECT_DOUBLE_EQ(r["busbw_gbps"].get<double>(), r["algbw_gbps"].get<double>());
  }
  std::printf("fabric: %s\n", f.dump(2).c_str());
  EXPECT_EQ(Ctl({"down", "-f", cluster.string()}).exit_code, 0);
}

TEST_F(FabricCheckIntegration, AMissedThresholdStopsUpWithNothingLoaded) {
  StartAgent(0);
  StartAgent(1);
  // No loopback reaches a petabyte per second.
  fs::path cluster = ClusterWith("fabric_check: {min_busbw_gbps: 1000000}");
  CtlResult up = Ctl({"up", "-f", cluster.string()});
  std::printf("--- tandemctl up (exit %d) ---\n%s", up.exit_code, up.out.c_str());
  EXPECT_EQ(up.exit_code, 1);
  EXPECT_NE(up.out.find("up FAILED in fabric: fabric check failed: n1 (rank 0): bus bandwidth"), std::string::npos)
      << up.out;
  EXPECT_NE(up.out.find("is below fabric_check.min_busbw_gbps 1e+06"), std::string::npos) << up.out;
  EXPECT_EQ(up.out.find("load n1:"), std::string::npos) << up.out;
  CtlResult st = Ctl({"status", "-f", cluster.string(), "--json"});
  ASSERT_TRUE(st.json.is_object()) << st.out;
  for (const auto& n : st.json["nodes"]) EXPECT_EQ(n["state"], "idle") << n.dump();
}

TEST_F(FabricCheckIntegration, LinktestAddsTheCollectivesAfterItsTransfers) {
  StartAgent(0);
  StartAgent(1);
  fs::path cluster = WriteCluster("token");
  CtlResult lt = Ctl({"linktest", "-f", cluster.string(), "--json", "--duration", "1s", "--streams", "1"});
  ASSERT_TRUE(lt.json.is_object()) << lt.out;
  // The transfers' verdicts over lo are not this test's business: only the collectives are printed.
  std::printf("linktest exit %d, collectives: %s\n", lt.exit_code, lt.json["collectives"].dump(2).c_str());
  EXPECT_FALSE(lt.json["pairs"].empty());  // the transfers ran first
  const nlohmann::json& c = lt.json["collectives"];
  ASSERT_TRUE(c.is_object()) << lt.out;
  EXPECT_TRUE(c["ok"].get<bool>()) << c.dump(2);
  EXPECT_EQ(c["transport"], "gloo/tcp");
  ASSERT_EQ(c["ranks"].size(), 2u);
  EXPECT_GT(c["latency_median_us"].get<double>(), 0);
  EXPECT_GT(c["busbw_gbps"].get<double>(), 0);

  CtlResult without = Ctl({"linktest", "-f", cluster.string(), "--json", "--duration", "1s", "--streams", "1",
                           "--no-collectives"});
  ASSERT_TRUE(without.json.is_object()) << without.out;
  EXPECT_TRUE(without.json["collectives"].is_null()) << without.out;
}

TEST_F(FabricCheckIntegration, ARankWhoseAgentNeverComesIsNamedAtTheDeadline) {
  StartAgent(0);  // n2's agent is not started
  fs::path cluster = WriteCluster("token");
  absl::StatusOr<controller::ClusterContext> ctx = controller::LoadClusterContext(cluster.string(), StateDir());
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  controller::PreflightReport no_facts;
  absl::StatusOr<controller::ClusterPlan> plan = controller::MakeClusterPlan(ctx->spec, no_facts, 0, "");
  ASSERT_TRUE(plan.ok()) << plan.status();
  controller::FabricCheckOptions o;
  o.timeout = std::chrono::seconds(2);
  o.large_bytes = 1 << 20;
  const auto t0 = std::chrono::steady_clock::now();
  controller::FabricReport rep = controller::RunFabricCheck(*plan, *ctx->agents, o);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s(%.2f s)\n", controller::FormatFabricTable(rep).c_str(), took);
  EXPECT_FALSE(rep.ok());
  EXPECT_LT(took, 15.0);
  ASSERT_EQ(rep.ranks.size(), 2u);
  EXPECT_TRUE(absl::IsDeadlineExceeded(rep.ranks[0].status)) << rep.ranks[0].status;
  EXPECT_NE(rep.ranks[0].status.message().find(
                "CheckFabric: the agent answered DEADLINE_EXCEEDED: rank 1 of 2 did not join the fabric check within "
                "2.0 s"),
            std::string::npos)
      << rep.ranks[0].status;
  EXPECT_FALSE(rep.ranks[1].status.ok());
  EXPECT_NE(rep.ranks[1].status.message().find("CheckFabric"), std::string::npos) << rep.ranks[1].status;

  // Nothing of the failed check stays behind: with n2's agent up the next check passes.
  StartAgent(1);
  controller::FabricReport again = controller::RunFabricCheck(*plan, *ctx->agents, o);
  std::printf("%s", controller::FormatFabricTable(again).c_str());
  EXPECT_TRUE(again.ok()) << controller::FabricVerdict(again);
  EXPECT_GT(again.busbw_gbps, 0);
}

}  // namespace
}  // namespace tandem
