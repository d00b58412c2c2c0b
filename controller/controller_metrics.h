// The /metrics of `tandemctl serve` (prometheus-cpp): tandem_controller_* series for the
// cluster state, restarts, probes and the reconcile loop. Names are listed in docs/orchestration.md
// and used by deploy/grafana/tandem-dashboard.json.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "controller/reconciler.h"

namespace prometheus {
class Exposer;
class Registry;
class Counter;
class Gauge;
class Histogram;
}  // namespace prometheus

namespace tandem::controller {

class ControllerMetrics {
 public:
  ControllerMetrics();
  ~ControllerMetrics();

  // Serves /metrics on HOST:PORT (port 0 = any); returns the bound port.
  absl::StatusOr<int> Listen(const std::string& host_port);

  // One gauge per state name, 1 for the current one; operator_needed separately.
  void SetClusterState(ClusterState state, bool operator_needed, uint64_t generation);
  // Why serve is not restarting a group that needs it (one gauge per WaitReason, 1 for the
  // current one, all 0 when not waiting) and the budget: attempts counted in the window / allowed.
  void SetRecovery(WaitReason waiting, int attempts_in_window, int budget);
  void RecordRestart(bool ok);
  void RecordPreflightFailure();  // a preflight before a restart failed (not a counted attempt)
  void RecordProbe(bool ok, double latency_s);
  void RecordReconcile(double seconds);

  prometheus::Registry& registry() { return *registry_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  prometheus::Gauge* state_[5] = {};
  prometheus::Gauge* operator_needed_ = nullptr;
  prometheus::Gauge* generation_ = nullptr;
  prometheus::Counter* restarts_ok_ = nullptr;
  prometheus::Counter* restarts_failed_ = nullptr;
  prometheus::Counter* preflight_failures_ = nullptr;
  prometheus::Gauge* waiting_[5] = {};  // by WaitReason; [kNone] unused
  prometheus::Gauge* attempts_in_window_ = nullptr;
  prometheus::Gauge* budget_ = nullptr;
  prometheus::Counter* probes_ok_ = nullptr;
  prometheus::Counter* probes_failed_ = nullptr;
  prometheus::Gauge* probe_success_ = nullptr;
  prometheus::Histogram* probe_latency_ = nullptr;
  prometheus::Histogram* reconcile_seconds_ = nullptr;
};

}  // namespace tandem::controller
