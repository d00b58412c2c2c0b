#include "controller/cluster_ops.h"

#include <algorithm>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/secret_file.h"
#include "common/status.h"
#include "controller/agent_client.h"
#include "controller/control_client.h"
#include "controller/preflight_output.h"

namespace tandem::controller {
namespace {

using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

double SecondsSince(Steady::time_point t0) { return std::chrono::duration<double>(Steady::now() - t0).count(); }

int64_t UnixMs() {
  return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Runs fn(i) for every node on its own thread and waits for all.
void ForEachNode(size_t n, const std::function<void(size_t)>& fn) {
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) threads.emplace_back(fn, i);
  for (auto& t : threads) t.join();
}

absl::StatusOr<std::string> ReadKeyFile(const std::string& path) {
  if (path.empty()) return std::string();
  return ReadSecretFile(path, "api.key_file");
}

std::string FormatBytes(uint64_t done, uint64_t total) {
  bool gb = total >= 1000000000ull;
  double unit = gb ? 1e9 : 1e6;
  return absl::StrFormat("%.1f/%.1f %s", done / unit, total / unit, gb ? "GB" : "MB");
}

}  // namespace

absl::StatusOr<ClusterContext> LoadClusterContext(const std::string& cluster_file, const std::string& state_dir) {
  ClusterContext ctx;
  ASSIGN_OR_RETURN(ctx.spec, LoadClusterSpec(cluster_file));
  ASSIGN_OR_RETURN(ctx.credentials, LoadAgentCredentials(ctx.spec));
  ASSIGN_OR_RETURN(ctx.api_key, ReadKeyFile(ctx.spec.api_key_file));
  ctx.state_dir = state_dir.empty() ? DefaultControllerStateDir() : state_dir;
  return ctx;
}

ObservedState ObserveCluster(const ClusterContext& ctx, milliseconds timeout, std::vector<v1::RankStatus>* raw) {
  ObservedState out;
  const auto& nodes = ctx.spec.nodes;
  out.nodes.resize(nodes.size());
  std::vector<v1::RankStatus> statuses(nodes.size());
  ForEachNode(nodes.size(), [&](size_t i) {
    ObservedRank& r = out.nodes[i];
    r.name = nodes[i].name;
    ControlClient client(nodes[i].agent, ctx.credentials);
    absl::StatusOr<v1::RankStatus> st = client.GetStatus(timeout);
    if (!st.ok()) {
      r.reachable = false;
      r.error = std::string(st.status().message());
      return;
    }
    statuses[i] = *st;
    r.reachable = true;
    r.state = st->state();
    r.reason = st->reason();
    r.generation = st->generation();
    r.rank = st->rank();
    r.kv_tokens = st->kv_tokens();
    r.iterations = st->iterations();
    r.queue_depth = st->queue_depth();
  });
  if (raw) *raw = std::move(statuses);
  return out;
}

std::vector<absl::Status> TearDown(const ClusterContext& ctx, bool unload, const std::string& reason,
                                   bool stop_serving) {
  const auto& nodes = ctx.spec.nodes;
  std::vector<absl::Status> out(nodes.size());
  const milliseconds timeout = ctx.spec.timeouts.leave;
  ForEachNode(nodes.size(), [&](size_t i) {
    ControlClient client(nodes[i].agent, ctx.credentials);
    if (stop_serving) {
      // Best effort: an agent that is not serving may refuse; leaving is what matters.
      (void)client.SetServing(false, timeout);
    }
    out[i] = client.LeaveGroup(unload, reason, timeout);
  });
  return out;
}

ProbeResult RunProbe(const ClusterContext& ctx, uint64_t generation) {
  ProbeResult r;
  r.generation = generation;
  const ProbeSpec& p = ctx.spec.probe;
  ControlClient head(ctx.spec.nodes[0].agent, ctx.credentials);
  v1::GenerateRequest req;
  if (!p.prompt_ids.empty()) {
    for (int32_t id : p.prompt_ids) req.add_prompt_ids(id);
  } else {
    req.set_prompt(p.prompt);
  }
  req.set_chat(false);
  req.set_max_tokens(static_cast<uint32_t>(p.max_tokens));
  milliseconds timeout = std::min(p.timeout, ctx.spec.timeouts.probe);
  req.set_timeout_ms(static_cast<uint32_t>(timeout.count()));
  auto t0 = Steady::now();
  // The RPC deadline is a little longer than the engine's, so the agent's own error wins.
  absl::StatusOr<v1::GenerateResponse> resp = head.Generate(req, timeout + milliseconds(2000));
  r.latency_s = SecondsSince(t0);

  absl::StatusOr<ControllerState> state = LoadControllerState(ctx.state_dir, ctx.spec.name);
  ControllerState st = state.ok() ? *state : ControllerState{};
  if (!resp.ok()) {
    r.detail = std::string(resp.status().message());
  } else if (!resp->error().empty()) {
    r.detail = "the head answered with an error: " + resp->error();
  } else {
    r.token_ids.assign(resp->token_ids().begin(), resp->token_ids().end());
    if (!p.expect.empty()) {
      r.ok = resp->text().find(p.expect) != std::string::npos;
      r.detail = r.ok ? absl::StrCat("answer contains \"", p.expect, "\": \"", resp->text(), "\"")
                      : absl::StrCat("answer \"", resp->text(), "\" does not contain \"", p.expect, "\"");
    } else if (r.token_ids.empty()) {
      r.detail = "the head answered with no tokens";
    } else if (st.golden_generation == generation && !st.golden_ids.empty()) {
      r.ok = r.token_ids == st.golden_ids;
      r.detail = r.ok ? absl::StrCat("greedy ids match the reference of generation ", generation, " (",
                                     r.token_ids.size(), " tokens)")
                      : absl::StrCat("greedy ids [", absl::StrJoin(r.token_ids, ","), "] differ from the reference [",
                                     absl::StrJoin(st.golden_ids, ","), "] of generation ", generation);
    } else {
      // First successful probe of this generation: its answer is the reference from now on.
      r.ok = true;
      r.recorded_golden = true;
      st.golden_generation = generation;
      st.golden_ids = r.token_ids;
      r.detail = absl::StrCat("recorded greedy ids [", absl::StrJoin(r.token_ids, ","), "] as the reference of generation ",
                              generation);
    }
  }
  st.last_probe = ProbeRecord{r.ok, generation, UnixMs(), r.latency_s, r.detail};
  absl::Status saved = SaveControllerState(ctx.state_dir, ctx.spec.name, st);
  if (!saved.ok() && r.recorded_golden) {
    // Without the reference on disk later probes could not be compared: say so loudly.
    r.ok = false;
    r.detail = absl::StrCat(r.detail, "; but: ", saved.message());
  }
  return r;
}

UpResult BringUp(const ClusterContext& ctx, const UpOptions& options, const ReportLine& report) {
  UpResult res;
  const ClusterSpec& spec = ctx.spec;
  const size_t n = spec.nodes.size();
  std::mutex report_mu;
  auto say = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(report_mu);
    report(line);
  };
  const auto start = Steady::now();
  auto phase_start = start;
  auto end_phase = [&](const char* name) {
    res.phases.push_back({name, SecondsSince(phase_start)});
    say(absl::StrFormat("%s: %.2f s", name, res.phases.back().seconds));
    phase_start = Steady::now();
  };
  auto fail = [&](const std::string& phase, const std::string& error, bool tear_down) {
    res.ok = false;
    res.failed_phase = phase;
    res.error = error;
    if (tear_down) {
      say("leaving the group on every agent (nothing stays half-alive)");
      std::vector<absl::Status> left = TearDown(ctx, true, "up failed in " + phase, true);
      for (size_t i = 0; i < n; ++i) {
        if (!left[i].ok()) say(absl::StrCat("  ", spec.nodes[i].name, ": could not leave: ", left[i].message()));
      }
    }
    res.total_seconds = SecondsSince(start);
    return res;
  };

  // 1. Preflight: facts and weights parity on every node; any failure stops here.
  ObserveOptions observe;
  observe.facts_timeout = std::min(spec.timeouts.preflight, spec.timeouts.status * 5);
  observe.hash_timeout = spec.timeouts.preflight;
  observe.hash_weights = options.hash_weights;
  observe.credentials = ctx.credentials;
  observe.rehash = options.rehash || ctx.spec.preflight_verify_full;
  std::vector<NodeObservation> observations = ObserveNodes(spec, observe);
  PreflightReport preflight = ComparePreflight(spec, observations);
  end_phase("preflight");
  if (!preflight.ok()) {
    res.preflight_table = FormatPreflightTable(preflight, res.phases.back().seconds);
    return fail("preflight", absl::StrCat(preflight.Count(CheckStatus::kFail), " preflight check(s) failed: ",
                                          SummarizeFailedChecks(preflight)),
                false);
  }

  // 2. Plan: what is running now decides the generation (and whether there is anything to do).
  ObservedState now = ObserveCluster(ctx, spec.timeouts.status);
  for (const auto& node : now.nodes) {
    if (!node.reachable) return fail("plan", absl::StrCat(node.name, ": ", node.error), false);
  }
  if (options.accept_serving && ClassifyCluster(now) == ClusterState::kServing) {
    res.ok = true;
    res.already_serving = true;
    res.generation = now.nodes[0].generation;
    say(absl::StrCat("already serving generation ", res.generation, ": nothing to do"));
    std::vector<v1::RankStatus> raw;
    ObserveCluster(ctx, spec.timeouts.status, &raw);
    res.api_endpoint = raw.empty() ? "" : raw[0].api_endpoint();
    res.transport = raw.empty() ? "" : raw[0].transport();
    res.total_seconds = SecondsSince(start);
    return res;
  }
  std::vector<v1::RankStatus> raw;
  ObserveCluster(ctx, spec.timeouts.status, &raw);
  uint64_t max_gen = 0;
  bool leftovers = false;
  for (const auto& s : raw) {
    max_gen = std::max({max_gen, s.generation(), s.persisted().generation()});
    if (s.state() != v1::RANK_STATE_IDLE && s.state() != v1::RANK_STATE_UNSPECIFIED) leftovers = true;
  }
  absl::StatusOr<ControllerState> saved = LoadControllerState(ctx.state_dir, spec.name);
  if (!saved.ok()) return fail("plan", std::string(saved.status().message()), false);
  max_gen = std::max(max_gen, saved->last_generation);
  absl::StatusOr<ClusterPlan> plan = MakeClusterPlan(spec, preflight, max_gen, ctx.api_key);
  if (!plan.ok()) return fail("plan", std::string(plan.status().message()), false);
  ControllerState next_state = *saved;
  next_state.last_generation = plan->generation;
  if (absl::Status s = SaveControllerState(ctx.state_dir, spec.name, next_state); !s.ok()) {
    return fail("plan", std::string(s.message()), false);
  }
  res.generation = plan->generation;
  for (auto& r : plan->ranks) {
    r.join.set_timeout_ms(static_cast<uint32_t>(spec.timeouts.join.count()));
  }
  std::string plan_text = DescribePlan(*plan);
  if (!plan_text.empty() && plan_text.back() == '\n') plan_text.pop_back();
  say(plan_text);
  if (leftovers) {
    // A previous group (or a failed one) is still loaded somewhere: start from nothing.
    say("leaving the previous group on every agent first");
    TearDown(ctx, true, "up: replacing the previous group", true);
  }
  end_phase("plan");

  // 3. Load on every agent in parallel, with progress lines (at most one per node a second).
  std::vector<std::string> load_errors(n);
  ForEachNode(n, [&](size_t i) {
    const RankPlan& r = plan->ranks[i];
    ControlClient client(r.agent, ctx.credentials);
    auto last = Steady::now() - std::chrono::seconds(10);
    auto on_event = [&](const v1::LoadModelEvent& ev) {
      if (ev.done() || Steady::now() - last < std::chrono::seconds(1)) return;
      last = Steady::now();
      say(absl::StrCat("load ", r.node, ": ", ev.phase(), " ", FormatBytes(ev.bytes_done(), ev.bytes_total())));
    };
    absl::StatusOr<v1::LoadModelEvent> done = client.LoadModel(r.load, spec.timeouts.load, on_event);
    if (!done.ok()) load_errors[i] = std::string(done.status().message());
    else if (!done->error().empty()) load_errors[i] = done->error();
    else say(absl::StrFormat("load %s: done in %.2f s", r.node, done->seconds()));
  });
  std::vector<std::string> failures;
  for (size_t i = 0; i < n; ++i) {
    if (!load_errors[i].empty()) failures.push_back(absl::StrCat(spec.nodes[i].name, ": ", load_errors[i]));
  }
  end_phase("load");
  if (!failures.empty()) return fail("load", absl::StrJoin(failures, "; "), true);

  // 4. Rendezvous, workers first: their JoinGroup blocks until the head arrives.
  std::vector<absl::StatusOr<v1::JoinGroupResponse>> joins(n, absl::UnknownError("not called"));
  std::vector<std::thread> workers;
  for (size_t i = 1; i < n; ++i) {
    workers.emplace_back([&, i] {
      ControlClient client(plan->ranks[i].agent, ctx.credentials);
      joins[i] = client.JoinGroup(plan->ranks[i].join, spec.timeouts.join);
    });
  }
  // Give the workers' calls a moment to reach their agents, so the head really is last.
  if (n > 1) std::this_thread::sleep_for(milliseconds(200));
  {
    ControlClient head(plan->ranks[0].agent, ctx.credentials);
    joins[0] = head.JoinGroup(plan->ranks[0].join, spec.timeouts.join);
  }
  for (auto& t : workers) t.join();
  std::vector<std::string> transports;
  for (size_t i = 0; i < n; ++i) {
    const std::string& name = spec.nodes[i].name;
    if (!joins[i].ok()) {
      failures.push_back(absl::StrCat(name, ": ", joins[i].status().message()));
    } else if (!joins[i]->ok()) {
      failures.push_back(absl::StrCat(name, ": ", joins[i]->error()));
    } else {
      transports.push_back(joins[i]->transport());
      say(absl::StrFormat("join %s: rank %d ready, kv %d tokens, transport %s (%.2f s)", name, i,
                          joins[i]->kv_tokens(), joins[i]->transport(), joins[i]->seconds()));
    }
  }
  end_phase("join");
  if (!failures.empty()) return fail("join", absl::StrJoin(failures, "; "), true);
  res.api_endpoint = joins[0]->api_endpoint();
  std::sort(transports.begin(), transports.end());
  transports.erase(std::unique(transports.begin(), transports.end()), transports.end());
  res.transport = absl::StrJoin(transports, ",");
  // Fabric: the group's first collective ran inside JoinGroup with the production comm env;
  // report the transport it used (see docs/orchestration.md for why there is no separate one).
  say(absl::StrCat("fabric: transport ", res.transport.empty() ? "unknown" : res.transport));

  // 5. Probe through the head before anyone else can send a request.
  ProbeResult probe = RunProbe(ctx, plan->generation);
  say(absl::StrFormat("probe: %s in %.2f s: %s", probe.ok ? "ok" : "FAILED", probe.latency_s, probe.detail));
  end_phase("probe");
  if (!probe.ok) return fail("probe", probe.detail, true);

  // 6. Open the gate: the head's API (and /health) answer from now on.
  std::vector<absl::Status> opened(n);
  ForEachNode(n, [&](size_t i) {
    ControlClient client(spec.nodes[i].agent, ctx.credentials);
    opened[i] = client.SetServing(true, spec.timeouts.status);
  });
  for (size_t i = 0; i < n; ++i) {
    if (!opened[i].ok()) failures.push_back(absl::StrCat(spec.nodes[i].name, ": ", opened[i].message()));
  }
  end_phase("serving");
  if (!failures.empty()) return fail("serving", absl::StrJoin(failures, "; "), true);
  res.ok = true;
  res.total_seconds = SecondsSince(start);
  return res;
}

}  // namespace tandem::controller
