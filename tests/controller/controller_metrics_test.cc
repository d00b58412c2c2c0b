// tandemctl serve's /metrics: the format rules, every series the dashboard and the alerts read
// present at zero before the first reconcile turn, and each Set/Record call moving its series.
#include "controller/controller_metrics.h"

#include <gtest/gtest.h>

#include <sstream>

#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "tests/common/metrics_text.h"

namespace tandem::controller {
namespace {
using tandem::testing::ExpositionProblems;
using tandem::testing::SeriesValue;

std::string Text(ControllerMetrics& m) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, m.registry().Collect());
  return out.str();
}

std::string State(const char* name) { return std::string("tandem_controller_cluster_state{state=\"") + name + "\"}"; }
std::string Waiting(const char* name) { return std::string("tandem_controller_waiting{reason=\"") + name + "\"}"; }

TEST(ControllerMetricsTest, FreshRegistryFollowsTheRulesAndStartsAtZero) {
  ControllerMetrics m;
  const std::string text = Text(m);
  EXPECT_EQ(ExpositionProblems(text), std::vector<std::string>{}) << text;
  for (const std::string& series :
       {State("serving"), State("degraded"), State("starting"), State("down"), State("failed"),
        Waiting("agent_unreachable"), Waiting("preflight_failed"), Waiting("backoff"), Waiting("budget_exhausted"),
        std::string("tandem_controller_operator_needed"), std::string("tandem_controller_group_generation"),
        std::string("tandem_controller_restarts_total{result=\"ok\"}"),
        std::string("tandem_controller_restarts_total{result=\"failed\"}"),
        std::string("tandem_controller_preflight_failures_total"),
        std::string("tandem_controller_restart_attempts_in_window"), std::string("tandem_controller_restart_budget"),
        std::string("tandem_controller_probes_total{result=\"ok\"}"),
        std::string("tandem_controller_probes_total{result=\"failed\"}"),
        std::string("tandem_controller_probe_success"), std::string("tandem_controller_probe_latency_seconds_count"),
        std::string("tandem_controller_reconcile_seconds_count")}) {
    EXPECT_EQ(SeriesValue(text, series), 0.0) << series;
  }
  EXPECT_EQ(SeriesValue(text, Waiting("none")), std::nullopt) << "not waiting is all reasons at 0, not a series";
}

TEST(ControllerMetricsTest, StateAndRecoveryAreOneHot) {
  ControllerMetrics m;
  m.SetClusterState(ClusterState::kDegraded, true, 7);
  m.SetRecovery(WaitReason::kBackoff, 2, 3);
  std::string text = Text(m);
  for (const char* s : {"serving", "degraded", "starting", "down", "failed"}) {
    EXPECT_EQ(SeriesValue(text, State(s)), std::string(s) == "degraded" ? 1.0 : 0.0) << s;
  }
  for (const char* r : {"agent_unreachable", "preflight_failed", "backoff", "budget_exhausted"}) {
    EXPECT_EQ(SeriesValue(text, Waiting(r)), std::string(r) == "backoff" ? 1.0 : 0.0) << r;
  }
  EXPECT_EQ(SeriesValue(text, "tandem_controller_operator_needed"), 1.0);
  EXPECT_EQ(SeriesValue(text, "tandem_controller_group_generation"), 7.0);
  EXPECT_EQ(SeriesValue(text, "tandem_controller_restart_attempts_in_window"), 2.0);
  EXPECT_EQ(SeriesValue(text, "tandem_controller_restart_budget"), 3.0);

  m.SetClusterState(ClusterState::kServing, false, 8);
  m.SetRecovery(WaitReason::kNone, 0, 3);
  text = Text(m);
  EXPECT_EQ(SeriesValue(text, State("serving")), 1.0);
  EXPECT_EQ(SeriesValue(text, State("degraded")), 0.0);
  EXPECT_EQ(SeriesValue(text, Waiting("backoff")), 0.0);
  EXPECT_EQ(SeriesValue(text, "tandem_controller_operator_needed"), 0.0);
}

TEST(ControllerMetricsTest, RecordsCountByOutcome) {
  ControllerMetrics m;
  m.RecordRestart(true);
  m.RecordRestart(false);
  m.RecordRestart(false);
  m.RecordPreflightFailure();
  m.RecordProbe(true, 0.2);
  m.RecordProbe(false, 3.0);
  m.RecordReconcile(0.02);
  std::string text = Text(m);
  EXPECT_EQ(ExpositionProblems(text), std::vector<std::string>{}) << text;
  EXPECT_EQ(SeriesValue(text, "tandem_controller_restarts_total{result=\"ok\"}"), 1.0);
  EXPECT_EQ(SeriesValue(text, "tandem_controller_restarts_total{result=\"failed\"}"), 2.0);
  EXPECT_EQ(SeriesValue(text, "tandem_controller_preflight_failures_total"), 1.0);
  EXPECT_EQ(SeriesValue(text, "tandem_controller_probes_total{result=\"ok\"}"), 1.0);
  EXPECT_EQ(SeriesValue(text, "tandem_controller_probes_total{result=\"failed\"}"), 1.0);
  EXPECT_EQ(SeriesValue(text, "tandem_controller_probe_success"), 0.0) << "the last probe failed";
  EXPECT_EQ(SeriesValue(text, "tandem_controller_probe_latency_seconds_count"), 2.0);
  EXPECT_DOUBLE_EQ(*SeriesValue(text, "tandem_controller_probe_latency_seconds_sum"), 3.2);
  EXPECT_EQ(SeriesValue(text, "tandem_controller_probe_latency_seconds_bucket{le=\"0.25\"}"), 1.0);
  EXPECT_EQ(SeriesValue(text, "tandem_controller_reconcile_seconds_count"), 1.0);
  m.RecordProbe(true, 0.1);
  EXPECT_EQ(SeriesValue(Text(m), "tandem_controller_probe_success"), 1.0);
}

TEST(ControllerMetricsTest, ListenBindsAPortOrSaysWhy) {
  ControllerMetrics m;
  auto port = m.Listen("127.0.0.1:0");
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_GT(*port, 0);
  ControllerMetrics bad;
  auto refused = bad.Listen("not-an-address");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  EXPECT_NE(refused.status().message().find("not-an-address"), std::string_view::npos);
}

}  // namespace
}  // namespace tandem::controller
