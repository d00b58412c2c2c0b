#include "controller/serve_command.h"

#include <cstdio>
#include <thread>

#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/status.h"
#include "controller/cluster_ops.h"
#include "controller/controller_metrics.h"
#include "controller/preflight_command.h"

namespace tandem::controller {

int RunServe(const ServeCommandOptions& options, const std::atomic<bool>* stop) {
  absl::StatusOr<ClusterContext> ctx = LoadClusterContext(options.cluster_file, options.state_dir);
  if (!ctx.ok()) {
    std::fprintf(stderr, "tandemctl: %s\n", StatusText(ctx.status()).c_str());
    return kExitBadConfig;
  }
  const ClusterSpec& spec = ctx->spec;
  ControllerMetrics metrics;
  std::string listen = options.metrics_listen.empty() ? spec.serve.metrics_listen : options.metrics_listen;
  if (!listen.empty()) {
    absl::StatusOr<int> port = metrics.Listen(listen);
    if (!port.ok()) {
      std::fprintf(stderr, "tandemctl: %s\n", StatusText(port.status()).c_str());
      return kExitBadConfig;
    }
    std::string host = listen.substr(0, listen.rfind(':'));
    // Tests and scripts read this line to find /metrics when the port was 0.
    std::printf("tandemctl serve: metrics=%s:%d\n", host.c_str(), *port);
  }
  std::printf("tandemctl serve: reconciling %s (%zu nodes) every %.1f s\n", spec.name.c_str(), spec.nodes.size(),
              options.loop_interval.count() / 1000.0);
  std::fflush(stdout);

  DesiredSpec desired;
  desired.probe_interval = spec.probe.interval;
  desired.stuck_after = spec.serve.stuck_after;
  desired.restart_budget = spec.serve.restart_budget;
  desired.restart_window = spec.serve.restart_window;
  desired.start_grace = spec.timeouts.join + spec.timeouts.probe;
  ReconcilerMemory memory;
  std::string last_line;
  UpOptions up;
  up.hash_weights = options.hash_weights;
  up.accept_serving = false;

  while (!stop->load()) {
    auto t0 = std::chrono::steady_clock::now();
    ObservedState observed = ObserveCluster(*ctx, spec.timeouts.status);
    Actions actions = Reconcile(desired, observed, memory, t0);
    memory = actions.memory;
    std::string line = absl::StrFormat("cluster %s%s", actions.state_detail,
                                       actions.reason.empty() ? "" : " (" + actions.reason + ")");
    if (line != last_line && !actions.Has(ActionKind::kProbe)) {
      TLOG(INFO) << line;
      last_line = line;
    }
    for (ActionKind a : actions.actions) {
      if (a == ActionKind::kProbe) {
        ProbeResult r = RunProbe(*ctx, observed.nodes[0].generation);
        metrics.RecordProbe(r.ok, r.latency_s);
        memory = RecordProbe(memory, r.ok, r.detail, std::chrono::steady_clock::now());
        if (!r.ok) TLOG(WARN) << "probe failed: " << r.detail;
      } else if (a == ActionKind::kRestart) {
        TLOG(WARN) << "restarting the whole group: " << actions.reason;
        UpResult r = BringUp(*ctx, up, [](const std::string& l) { TLOG(INFO) << "  up: " << l; });
        metrics.RecordRestart(r.ok);
        memory = RecordRestart(desired, memory, r.ok, std::chrono::steady_clock::now());
        if (r.ok) {
          TLOG(INFO) << "serving again: generation " << r.generation << " in " << r.total_seconds << " s";
        } else {
          if (!r.preflight_table.empty()) TLOG(WARN) << "preflight:\n" << r.preflight_table;
          TLOG(WARN) << "restart failed in " << r.failed_phase << ": " << r.error << "; next attempt not before "
                     << BackoffFor(desired, memory.consecutive_failures).count() / 1000.0 << " s";
        }
      } else if (a == ActionKind::kLeave) {
        TearDown(*ctx, true, "desired down", true);
      }
    }
    metrics.SetClusterState(actions.state, memory.operator_needed, observed.nodes[0].generation);
    metrics.RecordReconcile(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    // Sleep in slices so SIGTERM ends the loop within ~100 ms.
    auto wake = t0 + options.loop_interval;
    while (!stop->load() && std::chrono::steady_clock::now() < wake) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  TLOG(INFO) << "tandemctl serve: stopping (the cluster is left as it is)";
  return kExitOk;
}

}  // namespace tandem::controller
