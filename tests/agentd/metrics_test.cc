// The agent's /metrics text: the format rules (ours and promtool's), node facts read from a fake
// tree at scrape time, the hashing series at zero before the first hash (progress gauges, a
// counter of bytes really read), and the hosted rank's series once a source is set (one-hot
// state, a counter of engine steps).
#include "agentd/metrics.h"

#include <gtest/gtest.h>

#include <iostream>
#include <set>

#include "tests/common/fake_node.h"
#include "tests/common/metrics_text.h"
#include "tests/common/promtool.h"
#include "tests/common/test_util.h"

namespace tandem::agentd {
namespace {
using namespace tandem::testing;  // the exposition checks and their Series/Problems

class AgentMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto [sys, proc] = WriteFakeNode(tmp_ / "node", {});
    metrics_ = std::make_unique<AgentMetrics>(FactsRoots{sys, proc}, "spark-a");
  }
  TempDir tmp_;
  std::unique_ptr<AgentMetrics> metrics_;
};

TEST_F(AgentMetricsTest, NodeFactsAndHashGaugesBeforeAnyHash) {
  const std::string text = metrics_->Render();
  std::cout << text.substr(0, text.find("tandem_memory_total_bytes")) << "\n";
  EXPECT_EQ(ExpositionProblems(text), Problems{}) << text;
  EXPECT_NE(text.find("tandem_node_info{"), std::string::npos);
  EXPECT_NE(text.find("driver=\"580.95.05\""), std::string::npos);
  EXPECT_NE(text.find("kernel=\"6.11.0-1016-nvidia\""), std::string::npos);
  EXPECT_NE(text.find("node=\"spark-a\""), std::string::npos);
  EXPECT_EQ(SeriesMismatches(text, {{"tandem_memory_total_bytes", 137438953472.0},
                                    {"tandem_memory_available_bytes", 120.0 * 1024 * 1024 * 1024},
                                    {"tandem_swap_total_bytes", 0},
                                    {"tandem_hash_bytes_done", 0},
                                    {"tandem_hash_size_bytes", 0},
                                    {"tandem_hash_files_done", 0},
                                    {"tandem_hash_throughput_bytes_per_second", 0},
                                    {"tandem_hash_bytes_total", 0},
                                    {"tandem_hashes_total", 0}}),
            Problems{});
  EXPECT_NE(text.find("# TYPE tandem_hash_bytes_total counter"), std::string::npos) << text;
  EXPECT_EQ(text.find("tandem_rank_state"), std::string::npos) << "no rank hosted: no rank series";
}

// A manifest of `sizes` files; those in `cached` came from the cache, `broken` could not be read.
v1::WeightsManifest Manifest(const std::vector<uint64_t>& sizes, const std::set<size_t>& cached,
                             const std::set<size_t>& broken, double bytes_per_second) {
  v1::WeightsManifest m;
  for (size_t i = 0; i < sizes.size(); ++i) {
    v1::FileDigest* f = m.add_files();
    f->set_size(sizes[i]);
    f->set_cached(cached.count(i) > 0);
    if (broken.count(i)) f->set_error("unreadable");
  }
  m.set_hashed_bytes_per_second(bytes_per_second);
  return m;
}

TEST_F(AgentMetricsTest, HashProgressMovesGaugesAndFinishedHashesCountReadBytes) {
  metrics_->SetHashProgress(2, 1000, 4000);
  EXPECT_EQ(SeriesMismatches(metrics_->Render(), {{"tandem_hash_files_done", 2},
                                                  {"tandem_hash_bytes_done", 1000},
                                                  {"tandem_hash_size_bytes", 4000},
                                                  {"tandem_hash_bytes_total", 0}}),
            Problems{});
  // Only bytes really read count: the cached file and the unreadable one do not.
  metrics_->RecordHashDone(Manifest({1000, 2000, 500, 500}, {1}, {3}, 5e8));
  EXPECT_EQ(SeriesMismatches(metrics_->Render(), {{"tandem_hash_throughput_bytes_per_second", 5e8},
                                                  {"tandem_hash_bytes_total", 1500},
                                                  {"tandem_hashes_total", 1}}),
            Problems{});
  // A second hash of the same folder, all from the cache: the counter keeps its total.
  metrics_->SetHashProgress(0, 0, 4000);
  metrics_->RecordHashDone(Manifest({1000, 2000, 500, 500}, {0, 1, 2, 3}, {}, 0));
  const std::string text = metrics_->Render();
  EXPECT_EQ(SeriesMismatches(text, {{"tandem_hash_bytes_done", 0},
                                    {"tandem_hash_bytes_total", 1500},
                                    {"tandem_hashes_total", 2}}),
            Problems{});
  EXPECT_EQ(ExpositionProblems(text), Problems{}) << text;
  EXPECT_EQ(PromtoolFindingsOrEmpty(text), "") << text;
}

// tandem_rank_state of node spark-a: 1 for `current`, 0 for every other state.
Series RankStates(const std::string& current) {
  Series out;
  for (const char* s : {"idle", "loading", "loaded", "joining", "ready", "serving", "failed"}) {
    out.emplace_back(std::string("tandem_rank_state{node=\"spark-a\",state=\"") + s + "\"}", s == current);
  }
  return out;
}

// Read at scrape time: a second scrape sees the rank's new state without anything pushed.
TEST_F(AgentMetricsTest, RankSeriesComeFromTheSourceAtScrapeTime) {
  v1::RankStatus status;
  status.set_state(v1::RANK_STATE_SERVING);
  status.set_generation(4);
  status.set_queue_depth(3);
  status.set_kv_tokens(8192);
  status.set_state_slots(64);
  status.set_iterations(120);
  metrics_->SetRankStatusSource([&] { return status; });
  std::string text = metrics_->Render();
  EXPECT_EQ(ExpositionProblems(text), Problems{}) << text;
  // promtool (Debian's prometheus package; skipped where it is not installed) over everything the
  // endpoint serves: facts, hash series and the rank's.
  EXPECT_EQ(PromtoolFindingsOrEmpty(text), "") << text;
  EXPECT_EQ(SeriesMismatches(text, RankStates("serving")), Problems{});
  EXPECT_EQ(SeriesMismatches(text, {{"tandem_group_generation{node=\"spark-a\"}", 4},
                                    {"tandem_rank_queue_depth{node=\"spark-a\"}", 3},
                                    {"tandem_rank_kv_tokens{node=\"spark-a\"}", 8192},
                                    {"tandem_rank_state_slots{node=\"spark-a\"}", 64},
                                    {"tandem_rank_iterations_total{node=\"spark-a\"}", 120}}),
            Problems{});
  EXPECT_NE(text.find("# TYPE tandem_rank_iterations_total counter"), std::string::npos);

  status.set_state(v1::RANK_STATE_FAILED);
  EXPECT_EQ(SeriesMismatches(metrics_->Render(), RankStates("failed")), Problems{});
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
