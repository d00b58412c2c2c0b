// The agent's /metrics text: the format rules, node facts read from a fake tree at scrape time,
// the hashing gauges at zero before the first hash, and the hosted rank's series once a source
// is set (one-hot state, a counter of engine steps).
#include "agentd/metrics.h"

#include <gtest/gtest.h>

#include <iostream>

#include "tests/common/fake_node.h"
#include "tests/common/metrics_text.h"
#include "tests/common/test_util.h"

namespace tandem::agentd {
namespace {
using tandem::testing::ExpositionProblems;
using tandem::testing::FakeNodeOptions;
using tandem::testing::SeriesValue;
using tandem::testing::TempDir;
using tandem::testing::WriteFakeNode;

class AgentMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto [sys, proc] = WriteFakeNode(tmp_ / "node", FakeNodeOptions{});
    metrics_ = std::make_unique<AgentMetrics>(FactsRoots{sys, proc}, "spark-a");
  }
  TempDir tmp_;
  std::unique_ptr<AgentMetrics> metrics_;
};

TEST_F(AgentMetricsTest, NodeFactsAndHashGaugesBeforeAnyHash) {
  const std::string text = metrics_->Render();
  std::cout << text.substr(0, text.find("tandem_memory_total_bytes")) << "\n";
  EXPECT_EQ(ExpositionProblems(text), std::vector<std::string>{}) << text;
  EXPECT_NE(text.find("tandem_node_info{"), std::string::npos);
  EXPECT_NE(text.find("driver=\"580.95.05\""), std::string::npos);
  EXPECT_NE(text.find("kernel=\"6.11.0-1016-nvidia\""), std::string::npos);
  EXPECT_NE(text.find("node=\"spark-a\""), std::string::npos);
  EXPECT_EQ(SeriesValue(text, "tandem_memory_total_bytes"), 137438953472.0);
  EXPECT_EQ(SeriesValue(text, "tandem_memory_available_bytes"), 120.0 * 1024 * 1024 * 1024);
  EXPECT_EQ(SeriesValue(text, "tandem_swap_total_bytes"), 0.0);
  for (const char* name : {"tandem_hash_bytes_done", "tandem_hash_bytes_total", "tandem_hash_files_done",
                           "tandem_hash_throughput_bytes_per_second"}) {
    EXPECT_EQ(SeriesValue(text, name), 0.0) << name;
  }
  EXPECT_EQ(text.find("tandem_rank_state"), std::string::npos) << "no rank hosted: no rank series";
}

TEST_F(AgentMetricsTest, HashProgressMovesItsGauges) {
  metrics_->SetHashProgress(2, 1000, 4000);
  metrics_->SetHashThroughput(5e8);
  const std::string text = metrics_->Render();
  EXPECT_EQ(SeriesValue(text, "tandem_hash_files_done"), 2.0);
  EXPECT_EQ(SeriesValue(text, "tandem_hash_bytes_done"), 1000.0);
  EXPECT_EQ(SeriesValue(text, "tandem_hash_bytes_total"), 4000.0);
  EXPECT_EQ(SeriesValue(text, "tandem_hash_throughput_bytes_per_second"), 5e8);
}

// Read at scrape time: a second scrape sees the rank's new state without anything pushed.
TEST_F(AgentMetricsTest, RankSeriesComeFromTheSourceAtScrapeTime) {
  v1::RankStatus status;
  status.set_state(v1::RANK_STATE_SERVING);
  status.set_generation(4);
  status.set_queue_depth(3);
  status.set_kv_tokens(8192);
  status.set_iterations(120);
  metrics_->SetRankStatusSource([&] { return status; });
  std::string text = metrics_->Render();
  EXPECT_EQ(ExpositionProblems(text), std::vector<std::string>{}) << text;
  const char* states[] = {"idle", "loading", "loaded", "joining", "ready", "serving", "failed"};
  for (const char* s : states) {
    EXPECT_EQ(SeriesValue(text, std::string("tandem_rank_state{node=\"spark-a\",state=\"") + s + "\"}"),
              std::string(s) == "serving" ? 1.0 : 0.0)
        << s;
  }
  EXPECT_EQ(SeriesValue(text, "tandem_group_generation{node=\"spark-a\"}"), 4.0);
  EXPECT_EQ(SeriesValue(text, "tandem_rank_queue_depth{node=\"spark-a\"}"), 3.0);
  EXPECT_EQ(SeriesValue(text, "tandem_rank_kv_tokens{node=\"spark-a\"}"), 8192.0);
  EXPECT_EQ(SeriesValue(text, "tandem_rank_iterations_total{node=\"spark-a\"}"), 120.0);
  EXPECT_NE(text.find("# TYPE tandem_rank_iterations_total counter"), std::string::npos);

  status.set_state(v1::RANK_STATE_FAILED);
  text = metrics_->Render();
  EXPECT_EQ(SeriesValue(text, "tandem_rank_state{node=\"spark-a\",state=\"serving\"}"), 0.0);
  EXPECT_EQ(SeriesValue(text, "tandem_rank_state{node=\"spark-a\",state=\"failed\"}"), 1.0);
}

TEST_F(AgentMetricsTest, ListenServesOnAPortOrSaysWhy) {
  ASSERT_TRUE(metrics_->Listen("127.0.0.1:0").ok());
  EXPECT_GT(metrics_->port(), 0);
  AgentMetrics other(FactsRoots{}, "x");
  const absl::Status st = other.Listen("not-an-address");
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
}

}  // namespace
}  // namespace tandem::agentd
