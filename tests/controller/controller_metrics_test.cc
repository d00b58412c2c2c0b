// tandemctl serve's /metrics: the format rules (ours and promtool's), every series the dashboard and the alerts read
// present at zero before the first reconcile turn, and each Set/Record call moving its series.
#include "controller/controller_metrics.h"

#include <gtest/gtest.h>

#include <sstream>

#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "tests/common/metrics_text.h"
#include "tests/common/promtool.h"

namespace tandem::controller {
namespace {
using namespace tandem::testing;  // the exposition checks and their Series/Problems

std::string Text(ControllerMetrics& m) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, m.registry().Collect());
  return out.str();
}

// The one-hot gauges: each state (reason) with 1 for `current`, 0 for the others.
Series States(const char* current) {
  Series out;
  for (const char* s : {"serving", "degraded", "starting", "down", "failed"}) {
    out.emplace_back(std::string("tandem_controller_cluster_state{state=\"") + s + "\"}", std::string(s) == current);
  }
  return out;
}
Series Waiting(const char* current) {
  Series out;
  for (const char* r : {"agent_unreachable", "preflight_failed", "backoff", "budget_exhausted"}) {
    out.emplace_back(std::string("tandem_controller_waiting{reason=\"") + r + "\"}", std::string(r) == current);
  }
  return out;
}

TEST(ControllerMetricsTest, FreshRegistryFollowsTheRulesAndStartsAtZero) {
  ControllerMetrics m;
  const std::string text = Text(m);
  EXPECT_EQ(ExpositionProblems(text), Problems{}) << text;
  EXPECT_EQ(SeriesMismatches(text, States("")), Problems{});
  EXPECT_EQ(SeriesMismatches(text, Waiting("")), Problems{});
  EXPECT_EQ(SeriesMismatches(text, {{"tandem_controller_operator_needed", 0},
                                    {"tandem_controller_group_generation", 0},
                                    {"tandem_controller_restarts_total{result=\"ok\"}", 0},
                                    {"tandem_controller_restarts_total{result=\"failed\"}", 0},
                                    {"tandem_controller_preflight_failures_total", 0},
                                    {"tandem_controller_restart_attempts_in_window", 0},
                                    {"tandem_controller_restart_budget", 0},
                                    {"tandem_controller_probes_total{result=\"ok\"}", 0},
                                    {"tandem_controller_probes_total{result=\"failed\"}", 0},
                                    {"tandem_controller_probe_success", 0},
                                    {"tandem_controller_probe_latency_seconds_count", 0},
                                    {"tandem_controller_reconcile_seconds_count", 0}}),
            Problems{});
  EXPECT_EQ(text.find("reason=\"none\""), std::string::npos) << "not waiting is all reasons at 0, not a series";
  EXPECT_EQ(PromtoolFindingsOrEmpty(text), "") << text;
}

TEST(ControllerMetricsTest, StateAndRecoveryAreOneHot) {
  ControllerMetrics m;
  m.SetClusterState(ClusterState::kDegraded, true, 7);
  m.SetRecovery(WaitReason::kBackoff, 2, 3);
  std::string text = Text(m);
  EXPECT_EQ(SeriesMismatches(text, States("degraded")), Problems{});
  EXPECT_EQ(SeriesMismatches(text, Waiting("backoff")), Problems{});
  EXPECT_EQ(SeriesMismatches(text, {{"tandem_controller_operator_needed", 1},
                                    {"tandem_controller_group_generation", 7},
                                    {"tandem_controller_restart_attempts_in_window", 2},
                                    {"tandem_controller_restart_budget", 3}}),
            Problems{});

  m.SetClusterState(ClusterState::kServing, false, 8);
  m.SetRecovery(WaitReason::kNone, 0, 3);
  text = Text(m);
  EXPECT_EQ(SeriesMismatches(text, States("serving")), Problems{});
  EXPECT_EQ(SeriesMismatches(text, Waiting("")), Problems{});
  EXPECT_EQ(SeriesMismatches(text, {{"tandem_controller_operator_needed", 0}}), Problems{});
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
  const std::string text = Text(m);
  EXPECT_EQ(ExpositionProblems(text), Problems{}) << text;
  // The last probe failed: probe_success is 0.
  EXPECT_EQ(SeriesMismatches(text, {{"tandem_controller_restarts_total{result=\"ok\"}", 1},
                                    {"tandem_controller_restarts_total{result=\"failed\"}", 2},
                                    {"tandem_controller_preflight_failures_total", 1},
                                    {"tandem_controller_probes_total{result=\"ok\"}", 1},
                                    {"tandem_controller_probes_total{result=\"failed\"}", 1},
                                    {"tandem_controller_probe_success", 0},
                                    {"tandem_controller_probe_latency_seconds_count", 2},
                                    {"tandem_controller_probe_latency_seconds_sum", 3.2},
                                    {"tandem_controller_probe_latency_seconds_bucket{le=\"0.25\"}", 1},
                                    {"tandem_controller_reconcile_seconds_count", 1}}),
            Problems{});
  m.RecordProbe(true, 0.1);
  EXPECT_EQ(SeriesMismatches(Text(m), {{"tandem_controller_probe_success", 1}}), Problems{});
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
