#include "controller/serve_command.h"

#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/status.h"
#include "common/systemd_notify.h"
#include "controller/cluster_ops.h"
#include "controller/controller_metrics.h"
#include "controller/preflight_command.h"
#include "controller/serve_memory.h"

namespace tandem::controller {
namespace {

int64_t UnixNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The pair of clock readings every conversion of this process uses. Reading both clocks anew
// for each write would move every stored time by a millisecond or so, and rewrite the file
// every turn for nothing.
struct ClockPair {
  TimePoint steady = ReconcileClock::now();
  int64_t unix_ms = UnixNowMs();
};

// Writes serve's part of the state file when it changed since the last write (the rest of
// the file, golden ids and last probe, belongs to RunProbe and BringUp: read, replace, write).
class ServeRecordWriter {
 public:
  ServeRecordWriter(const ClusterContext& ctx, ClockPair clocks, ServeRecord loaded)
      : ctx_(ctx), clocks_(clocks), last_(std::move(loaded)) {}

  void Save(const ReconcilerMemory& memory) {
    ServeRecord record = ToServeRecord(memory, clocks_.steady, clocks_.unix_ms);
    if (record == last_) return;
    absl::StatusOr<ControllerState> st = LoadControllerState(ctx_.state_dir, ctx_.spec.name);
    absl::Status saved = st.status();
    if (st.ok()) {
      st->serve = record;
      saved = SaveControllerState(ctx_.state_dir, ctx_.spec.name, *st);
    }
    if (!saved.ok()) {
      // Keep serving; say it once per failure, not every turn.
      if (!warned_) TLOG(WARN) << "cannot save the restart budget: " << saved.message();
      warned_ = true;
      return;
    }
    warned_ = false;
    last_ = std::move(record);
  }

 private:
  const ClusterContext& ctx_;
  const ClockPair clocks_;
  ServeRecord last_;
  bool warned_ = false;
};

// The preflight, then (only when it passed) a counted attempt: see RecordPreflight/RecordRestart.
// A restart runs on the reconcile thread and may take minutes (the model loads): each line of its
// progress feeds the watchdog and becomes the unit's STATUS=.
ReconcilerMemory Restart(const ClusterContext& ctx, const DesiredSpec& desired, const UpOptions& up,
                         const std::string& why, ReconcilerMemory memory, ControllerMetrics& metrics,
                         systemd::WatchdogKicker& watchdog) {
  TLOG(WARN) << "restarting the whole group: " << why;
  systemd::NotifyStatus("restarting the whole group: " + why);
  const TimePoint started = ReconcileClock::now();
  UpTrace trace;
  absl::StatusOr<UpResult> r = BringUp(ctx, up,
                                       [&watchdog](const std::string& l) {
                                         TLOG(INFO) << "  up: " << l;
                                         systemd::NotifyStatus("restarting: " + l);
                                         watchdog.Kick();
                                       },
                                       &trace);
  const TimePoint done = ReconcileClock::now();
  const std::string error = StatusText(r.status());
  if (!r.ok() && trace.failed_phase == "preflight") {
    // BringUp stops at a failed preflight before it touches any agent: not an attempt.
    metrics.RecordPreflightFailure();
    memory = RecordPreflight(desired, memory, false, error, done);
    if (!trace.preflight_table.empty()) TLOG(WARN) << "preflight:\n" << trace.preflight_table;
    TLOG(WARN) << "preflight failed (not counted against the restart budget): " << error << "; next preflight in "
               << BackoffFor(desired, memory.preflight_failures).count() / 1000.0 << " s";
    return memory;
  }
  memory = RecordPreflight(desired, memory, true, "", done);
  std::string detail = r.ok() ? absl::StrCat("serving generation ", r->generation)
                              : absl::StrCat("failed in ", trace.failed_phase, ": ", error);
  memory = RecordRestart(desired, memory, r.ok(), detail, started, done);
  metrics.RecordRestart(r.ok());
  TLOG(INFO) << "restart attempt " << memory.restarts.size() << " of " << desired.restart_budget << " in the window: "
             << detail;
  if (r.ok()) {
    TLOG(INFO) << "serving again: generation " << r->generation << " in " << trace.total_seconds << " s";
  } else {
    TLOG(WARN) << "restart failed in " << trace.failed_phase << ": " << error << "; next attempt not before "
               << BackoffFor(desired, memory.consecutive_failures).count() / 1000.0 << " s";
  }
  return memory;
}

}  // namespace

int RunServe(const ServeCommandOptions& options, const std::atomic<bool>* stop) {
  absl::StatusOr<ClusterContext> ctx = LoadClusterContext(options.cluster_file, options.state_dir);
  if (!ctx.ok()) {
    std::fprintf(stderr, "tandemctl: %s\n", StatusText(ctx.status()).c_str());
    return kExitBadConfig;
  }
  const ClusterSpec& spec = ctx->spec;
  // The budget and its history outlive this process: a corrupt file is not silently a fresh budget.
  absl::StatusOr<ControllerState> state = LoadControllerState(ctx->state_dir, spec.name);
  if (!state.ok()) {
    std::fprintf(stderr, "tandemctl: %s\n", StatusText(state.status()).c_str());
    return kExitBadConfig;
  }
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
  const ClockPair clocks;
  ServeRecord loaded = state->serve.value_or(ServeRecord{});
  if (state->serve) {
    memory = FromServeRecord(loaded, clocks.steady, clocks.unix_ms);
    TLOG(INFO) << "restart budget from " << ControllerStatePath(ctx->state_dir, spec.name) << ": "
               << memory.restarts.size() << " attempt(s) recorded, " << desired.restart_budget << " allowed per "
               << std::chrono::duration_cast<std::chrono::seconds>(desired.restart_window).count() << " s"
               << (memory.operator_needed ? "; operator needed" : "");
  }
  ServeRecordWriter writer(*ctx, clocks, loaded);
  std::string last_line;
  bool announced_ready = false;
  // Fed by this loop: a reconcile turn stuck in an RPC or a restart stops the keep-alives.
  systemd::WatchdogKicker watchdog;
  UpOptions up;
  up.hash_weights = options.hash_weights;
  up.accept_serving = false;

  while (!stop->load()) {
    auto t0 = ReconcileClock::now();
    ObservedState observed = ObserveCluster(*ctx, spec.timeouts.status);
    Actions actions = Reconcile(desired, observed, memory, t0);
    memory = actions.memory;
    std::string line = absl::StrFormat("cluster %s%s", actions.state_detail,
                                       actions.reason.empty() ? "" : " (" + actions.reason + ")");
    if (line != last_line && !actions.Has(ActionKind::kProbe)) {
      TLOG(INFO) << line;
      last_line = line;
      if (announced_ready) systemd::NotifyStatus(line);
    }
    watchdog.Kick();
    for (ActionKind a : actions.actions) {
      if (a == ActionKind::kProbe) {
        uint64_t generation = observed.nodes[0].generation;
        double latency_s = 0;
        absl::StatusOr<ProbeAnswer> r = RunProbe(*ctx, generation, &latency_s);
        metrics.RecordProbe(r.ok(), latency_s);
        memory = RecordProbe(memory, generation, r.ok(), StatusText(r.status()), ReconcileClock::now());
        if (!r.ok()) TLOG(WARN) << "probe failed: " << r.status().message();
      } else if (a == ActionKind::kRestart) {
        memory = Restart(*ctx, desired, up, actions.reason, memory, metrics, watchdog);
      } else if (a == ActionKind::kLeave) {
        TearDown(*ctx, true, "desired down", true);
      }
    }
    writer.Save(memory);
    metrics.SetClusterState(actions.state, memory.operator_needed, observed.nodes[0].generation);
    metrics.SetRecovery(memory.waiting, static_cast<int>(memory.restarts.size()), desired.restart_budget);
    metrics.RecordReconcile(std::chrono::duration<double>(ReconcileClock::now() - t0).count());
    // Ready once the first turn has observed the cluster and acted: /metrics and the state file
    // now say something true.
    if (!announced_ready) {
      systemd::NotifyReady(line);
      announced_ready = true;
    }
    // Sleep in slices so SIGTERM ends the loop within ~100 ms.
    auto wake = t0 + options.loop_interval;
    while (!stop->load() && ReconcileClock::now() < wake) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      watchdog.Kick();
    }
  }
  TLOG(INFO) << "tandemctl serve: stopping (the cluster is left as it is)";
  systemd::NotifyStopping("stopping (the cluster is left as it is)");
  return kExitOk;
}

}  // namespace tandem::controller
