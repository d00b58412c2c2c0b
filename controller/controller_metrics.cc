#include "controller/controller_metrics.h"

#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace tandem::controller {

ControllerMetrics::ControllerMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  auto& state = prometheus::BuildGauge()
                    .Name("tandem_controller_cluster_state")
                    .Help("1 for the cluster's current state (serving, degraded, starting, down, failed)")
                    .Register(*registry_);
  const ClusterState all[] = {ClusterState::kServing, ClusterState::kDegraded, ClusterState::kStarting,
                              ClusterState::kDown, ClusterState::kFailed};
  for (ClusterState s : all) state_[static_cast<int>(s)] = &state.Add({{"state", ClusterStateName(s)}});
  operator_needed_ = &prometheus::BuildGauge()
                          .Name("tandem_controller_operator_needed")
                          .Help("1 when the restart budget is exhausted and serve stopped restarting")
                          .Register(*registry_)
                          .Add({});
  generation_ = &prometheus::BuildGauge()
                     .Name("tandem_controller_group_generation")
                     .Help("Generation of the group the head is in")
                     .Register(*registry_)
                     .Add({});
  auto& restarts = prometheus::BuildCounter()
                       .Name("tandem_controller_restarts_total")
                       .Help("Whole-group restart attempts counted against the budget (teardown + up after a "
                             "passing preflight), by outcome")
                       .Register(*registry_);
  restarts_ok_ = &restarts.Add({{"result", "ok"}});
  restarts_failed_ = &restarts.Add({{"result", "failed"}});
  preflight_failures_ = &prometheus::BuildCounter()
                             .Name("tandem_controller_preflight_failures_total")
                             .Help("Preflights before a restart that failed; not counted against the restart budget")
                             .Register(*registry_)
                             .Add({});
  auto& waiting = prometheus::BuildGauge()
                      .Name("tandem_controller_waiting")
                      .Help("1 for why a group that needs a restart is not being restarted now "
                            "(agent_unreachable, preflight_failed, backoff, budget_exhausted); all 0 when not waiting")
                      .Register(*registry_);
  for (WaitReason r : {WaitReason::kAgentUnreachable, WaitReason::kPreflightFailed, WaitReason::kBackoff,
                       WaitReason::kBudgetExhausted}) {
    waiting_[static_cast<int>(r)] = &waiting.Add({{"reason", WaitReasonName(r)}});
  }
  attempts_in_window_ = &prometheus::BuildGauge()
                             .Name("tandem_controller_restart_attempts_in_window")
                             .Help("Restart attempts counted against the budget in its current window")
                             .Register(*registry_)
                             .Add({});
  budget_ = &prometheus::BuildGauge()
                 .Name("tandem_controller_restart_budget")
                 .Help("Restart attempts allowed per window (serve.restart_budget)")
                 .Register(*registry_)
                 .Add({});
  auto& probes =
      prometheus::BuildCounter().Name("tandem_controller_probes_total").Help("Inference probes by outcome").Register(*registry_);
  probes_ok_ = &probes.Add({{"result", "ok"}});
  probes_failed_ = &probes.Add({{"result", "failed"}});
  probe_success_ = &prometheus::BuildGauge()
                        .Name("tandem_controller_probe_success")
                        .Help("1 when the last probe passed")
                        .Register(*registry_)
                        .Add({});
  probe_latency_ = &prometheus::BuildHistogram()
                        .Name("tandem_controller_probe_latency_seconds")
                        .Help("Latency of inference probes through the head")
                        .Register(*registry_)
                        .Add({}, prometheus::Histogram::BucketBoundaries{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30});
  reconcile_seconds_ = &prometheus::BuildHistogram()
                            .Name("tandem_controller_reconcile_seconds")
                            .Help("Duration of one reconcile turn (observe + decide + act)")
                            .Register(*registry_)
                            .Add({}, prometheus::Histogram::BucketBoundaries{0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120});
}

ControllerMetrics::~ControllerMetrics() = default;

absl::StatusOr<int> ControllerMetrics::Listen(const std::string& host_port) {
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(host_port);
  } catch (const std::exception& e) {
    return absl::UnavailableError("metrics listen " + host_port + ": " + e.what());
  }
  exposer_->RegisterCollectable(registry_);
  auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports[0];
}

void ControllerMetrics::SetClusterState(ClusterState state, bool operator_needed, uint64_t generation) {
  for (int i = 0; i < 5; ++i) state_[i]->Set(i == static_cast<int>(state) ? 1 : 0);
  operator_needed_->Set(operator_needed ? 1 : 0);
  generation_->Set(static_cast<double>(generation));
}

void ControllerMetrics::SetRecovery(WaitReason waiting, int attempts_in_window, int budget) {
  for (int i = 1; i < 5; ++i) waiting_[i]->Set(i == static_cast<int>(waiting) ? 1 : 0);
  attempts_in_window_->Set(attempts_in_window);
  budget_->Set(budget);
}

void ControllerMetrics::RecordPreflightFailure() { preflight_failures_->Increment(); }

void ControllerMetrics::RecordRestart(bool ok) { (ok ? restarts_ok_ : restarts_failed_)->Increment(); }

void ControllerMetrics::RecordProbe(bool ok, double latency_s) {
  (ok ? probes_ok_ : probes_failed_)->Increment();
  probe_success_->Set(ok ? 1 : 0);
  probe_latency_->Observe(latency_s);
}

void ControllerMetrics::RecordReconcile(double seconds) { reconcile_seconds_->Observe(seconds); }

}  // namespace tandem::controller
