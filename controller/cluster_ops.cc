#include "controller/cluster_ops.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/secret_file.h"
#include "common/status.h"
#include "controller/preflight_output.h"

namespace tandem::controller {
namespace {

using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

double SecondsBetween(Steady::time_point t0, Steady::time_point t1) {
  return std::chrono::duration<double>(t1 - t0).count();
}

int64_t UnixMs() {
  return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// OK when every node succeeded; else "name: message; name: message" over the failed ones,
// with the first failure's code.
absl::Status NodeFailures(const ClusterSpec& spec, const std::vector<absl::Status>& per_node) {
  std::vector<std::string> failures;
  absl::StatusCode code = absl::StatusCode::kOk;
  for (size_t i = 0; i < per_node.size(); ++i) {
    if (per_node[i].ok()) continue;
    if (code == absl::StatusCode::kOk) code = per_node[i].code();
    failures.push_back(absl::StrCat(spec.nodes[i].name, ": ", per_node[i].message()));
  }
  if (failures.empty()) return absl::OkStatus();
  return absl::Status(code, absl::StrJoin(failures, "; "));
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

// Judges the head's answer to a probe against probe.expect or the generation's reference
// (recording it in `st` when this is the first passing probe of the generation).
absl::StatusOr<ProbeAnswer> JudgeProbe(const ProbeSpec& p, uint64_t generation,
                                       const absl::StatusOr<v1::GenerateResponse>& resp, ControllerState& st) {
  if (!resp.ok()) return resp.status();
  ProbeAnswer a;
  a.token_ids.assign(resp->token_ids().begin(), resp->token_ids().end());
  if (!p.expect.empty()) {
    if (resp->text().find(p.expect) == std::string::npos) {
      return absl::DataLossError(absl::StrCat("answer \"", resp->text(), "\" does not contain \"", p.expect, "\""));
    }
    a.detail = absl::StrCat("answer contains \"", p.expect, "\": \"", resp->text(), "\"");
    return a;
  }
  if (a.token_ids.empty()) return absl::InternalError("the head answered with no tokens");
  if (st.golden_generation == generation && !st.golden_ids.empty()) {
    if (a.token_ids != st.golden_ids) {
      return absl::DataLossError(absl::StrCat("greedy ids [", absl::StrJoin(a.token_ids, ","),
                                              "] differ from the reference [", absl::StrJoin(st.golden_ids, ","),
                                              "] of generation ", generation));
    }
    a.detail = absl::StrCat("greedy ids match the reference of generation ", generation, " (", a.token_ids.size(),
                            " tokens)");
    return a;
  }
  // First successful probe of this generation: its answer is the reference from now on.
  a.recorded_golden = true;
  st.golden_generation = generation;
  st.golden_ids = a.token_ids;
  a.detail = absl::StrCat("recorded greedy ids [", absl::StrJoin(a.token_ids, ","), "] as the reference of generation ",
                          generation);
  return a;
}

}  // namespace

void ForEachNode(size_t n, const std::function<void(size_t)>& fn) {
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) threads.emplace_back(fn, i);
  for (auto& t : threads) t.join();
}

absl::StatusOr<ClusterContext> LoadClusterContext(const std::string& cluster_file, const std::string& state_dir) {
  ClusterContext ctx;
  ASSIGN_OR_RETURN(ctx.spec, LoadClusterSpec(cluster_file));
  ASSIGN_OR_RETURN(ctx.credentials, LoadAgentCredentials(ctx.spec));
  ASSIGN_OR_RETURN(ctx.api_key, ReadKeyFile(ctx.spec.api_key_file));
  ctx.state_dir = state_dir.empty() ? DefaultControllerStateDir() : state_dir;
  ctx.agents = GrpcClusterAgents(ctx.credentials);
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
    absl::StatusOr<v1::RankStatus> st = ctx.agents->Control(nodes[i].agent)->GetStatus(timeout);
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
  const auto leave = [&](size_t i) {
    std::unique_ptr<NodeControl> client = ctx.agents->Control(nodes[i].agent);
    if (stop_serving) {
      // Best effort: an agent that is not serving may refuse; leaving is what matters.
      (void)client->SetServing(false, timeout);
    }
    out[i] = client->LeaveGroup(unload, reason, timeout);
  };
  // The head (nodes[0], rank 0) first: its engine releases the workers over the comm while they are
  // still in the group. A worker that had left already made that release wait for the agent's
  // leave deadline (5 s) and then abort, past a 5 s leave timeout (a `down` reported the head NOT
  // DOWN in the loopback tests). Then the workers, in parallel.
  if (nodes.empty()) return out;
  leave(0);
  ForEachNode(nodes.size() - 1, [&](size_t i) { leave(i + 1); });
  return out;
}

absl::StatusOr<ProbeAnswer> RunProbe(const ClusterContext& ctx, uint64_t generation, double* latency_s) {
  const ProbeSpec& p = ctx.spec.probe;
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
  absl::StatusOr<v1::GenerateResponse> resp =
      ctx.agents->Control(ctx.spec.nodes[0].agent)->Generate(req, timeout + milliseconds(2000));
  const double latency = SecondsBetween(t0, Steady::now());
  if (latency_s) *latency_s = latency;

  absl::StatusOr<ControllerState> state = LoadControllerState(ctx.state_dir, ctx.spec.name);
  ControllerState st = state.ok() ? *state : ControllerState{};
  absl::StatusOr<ProbeAnswer> answer = JudgeProbe(p, generation, resp, st);
  const std::string detail = answer.ok() ? answer->detail : std::string(answer.status().message());
  st.last_probe = ProbeRecord{answer.ok(), generation, UnixMs(), latency, detail};
  absl::Status saved = SaveControllerState(ctx.state_dir, ctx.spec.name, st);
  if (!saved.ok() && answer.ok() && answer->recorded_golden) {
    // Without the reference on disk later probes could not be compared: say so loudly.
    return absl::Status(saved.code(), absl::StrCat(detail, "; but: ", saved.message()));
  }
  return answer;
}

PreflightReport RunPreflight(const ClusterContext& ctx, const UpOptions& options) {
  const ClusterSpec& spec = ctx.spec;
  ObserveOptions observe;
  observe.facts_timeout = std::min(spec.timeouts.preflight, spec.timeouts.status * 5);
  observe.hash_timeout = spec.timeouts.preflight;
  observe.hash_weights = options.hash_weights;
  observe.credentials = ctx.credentials;
  observe.rehash = options.rehash || spec.preflight_verify_full;
  return ComparePreflight(spec, ctx.agents->Observe(spec, observe));
}

absl::Status PreflightVerdict(const PreflightReport& preflight) {
  if (preflight.ok()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(preflight.Count(CheckStatus::kFail),
                                                    " preflight check(s) failed: ", SummarizeFailedChecks(preflight)));
}

absl::StatusOr<ClusterNow> ObserveForUp(const ClusterContext& ctx) {
  ClusterNow now;
  now.observed = ObserveCluster(ctx, ctx.spec.timeouts.status, &now.raw);
  for (const auto& node : now.observed.nodes) {
    if (!node.reachable) return absl::UnavailableError(absl::StrCat(node.name, ": ", node.error));
  }
  return now;
}

std::optional<UpResult> AlreadyServing(const ClusterNow& now) {
  if (ClassifyCluster(now.observed) != ClusterState::kServing) return std::nullopt;
  UpResult res;
  res.already_serving = true;
  res.generation = now.observed.nodes[0].generation;
  if (!now.raw.empty()) {
    res.api_endpoint = now.raw[0].api_endpoint();
    res.transport = now.raw[0].transport();
  }
  return res;
}

absl::StatusOr<UpPlan> PlanGroup(const ClusterContext& ctx, const ClusterNow& now, const PreflightReport& preflight) {
  const ClusterSpec& spec = ctx.spec;
  UpPlan out;
  uint64_t max_gen = 0;
  for (const auto& s : now.raw) {
    max_gen = std::max({max_gen, s.generation(), s.persisted().generation()});
    if (s.state() != v1::RANK_STATE_IDLE && s.state() != v1::RANK_STATE_UNSPECIFIED) out.leftovers = true;
  }
  ASSIGN_OR_RETURN(ControllerState saved, LoadControllerState(ctx.state_dir, spec.name));
  max_gen = std::max(max_gen, saved.last_generation);
  ASSIGN_OR_RETURN(out.plan, MakeClusterPlan(spec, preflight, max_gen, ctx.api_key));
  saved.last_generation = out.plan.generation;
  RETURN_IF_ERROR(SaveControllerState(ctx.state_dir, spec.name, saved));
  for (auto& r : out.plan.ranks) {
    r.join.set_timeout_ms(static_cast<uint32_t>(spec.timeouts.join.count()));
  }
  return out;
}

absl::Status LoadRanks(const ClusterContext& ctx, const ClusterPlan& plan, const UpClock& clock, const ReportLine& say) {
  const milliseconds timeout = ctx.spec.timeouts.load;
  std::vector<absl::Status> loaded(plan.ranks.size());
  ForEachNode(plan.ranks.size(), [&](size_t i) {
    const RankPlan& r = plan.ranks[i];
    auto last = clock.now() - std::chrono::seconds(10);
    auto on_event = [&](const v1::LoadModelEvent& ev) {
      if (ev.done() || clock.now() - last < std::chrono::seconds(1)) return;
      last = clock.now();
      say(absl::StrCat("load ", r.node, ": ", ev.phase(), " ", FormatBytes(ev.bytes_done(), ev.bytes_total())));
    };
    absl::StatusOr<v1::LoadModelEvent> done = ctx.agents->Control(r.agent)->LoadModel(r.load, timeout, on_event);
    loaded[i] = done.status();
    if (loaded[i].ok()) say(absl::StrFormat("load %s: done in %.2f s", r.node, done->seconds()));
  });
  return NodeFailures(ctx.spec, loaded);
}

absl::StatusOr<JoinedGroup> JoinRanks(const ClusterContext& ctx, const ClusterPlan& plan, const UpClock& clock,
                                      const ReportLine& say) {
  const size_t n = plan.ranks.size();
  const milliseconds timeout = ctx.spec.timeouts.join;
  std::vector<absl::StatusOr<v1::JoinGroupResponse>> joins(n, absl::UnknownError("not called"));
  std::atomic<bool> worker_failed{false};
  std::vector<std::thread> workers;
  for (size_t i = 1; i < n; ++i) {
    workers.emplace_back([&, i] {
      joins[i] = ctx.agents->Control(plan.ranks[i].agent)->JoinGroup(plan.ranks[i].join, timeout);
      if (!joins[i].ok()) worker_failed = true;
    });
  }
  // Give the workers' calls a moment to reach their agents, so the head really is last.
  if (n > 1) clock.wait(milliseconds(200), [&] { return worker_failed.load(); });
  const bool head_joins = !worker_failed;
  if (head_joins) joins[0] = ctx.agents->Control(plan.ranks[0].agent)->JoinGroup(plan.ranks[0].join, timeout);
  for (auto& t : workers) t.join();

  std::vector<absl::Status> joined(n);
  std::vector<std::string> transports;
  for (size_t i = 0; i < n; ++i) {
    if (i == 0 && !head_joins) continue;  // nothing happened on the head
    joined[i] = joins[i].status();
    if (!joined[i].ok()) continue;
    transports.push_back(joins[i]->transport());
    // Hybrid models also hold per-sequence state slots; a model without any keeps the line it always had.
    const std::string slots =
        joins[i]->state_slots() > 0 ? absl::StrFormat(", %d state slots", joins[i]->state_slots()) : "";
    say(absl::StrFormat("join %s: rank %d ready, kv %d tokens%s, transport %s (%.2f s)", ctx.spec.nodes[i].name, i,
                        joins[i]->kv_tokens(), slots, joins[i]->transport(), joins[i]->seconds()));
  }
  RETURN_IF_ERROR(NodeFailures(ctx.spec, joined));
  JoinedGroup group;
  group.api_endpoint = joins[0]->api_endpoint();
  std::sort(transports.begin(), transports.end());
  transports.erase(std::unique(transports.begin(), transports.end()), transports.end());
  group.transport = absl::StrJoin(transports, ",");
  return group;
}

absl::Status ProbeGroup(const ClusterContext& ctx, uint64_t generation, const ReportLine& say) {
  double latency_s = 0;
  absl::StatusOr<ProbeAnswer> probe = RunProbe(ctx, generation, &latency_s);
  say(absl::StrFormat("probe: %s in %.2f s: %s", probe.ok() ? "ok" : "FAILED", latency_s,
                      probe.ok() ? probe->detail : std::string(probe.status().message())));
  return probe.status();
}

absl::Status OpenServing(const ClusterContext& ctx) {
  const auto& nodes = ctx.spec.nodes;
  std::vector<absl::Status> opened(nodes.size());
  ForEachNode(nodes.size(), [&](size_t i) {
    opened[i] = ctx.agents->Control(nodes[i].agent)->SetServing(true, ctx.spec.timeouts.status);
  });
  return NodeFailures(ctx.spec, opened);
}

absl::StatusOr<UpResult> BringUp(const ClusterContext& ctx, const UpOptions& options, const ReportLine& report,
                                 UpTrace* trace) {
  UpTrace local;
  UpTrace& t = trace ? *trace : local;
  t = UpTrace{};
  const UpClock& clock = options.clock;
  std::mutex report_mu;
  const ReportLine say = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(report_mu);
    report(line);
  };
  const auto start = clock.now();
  auto phase_start = start;
  auto end_phase = [&](const char* name) {
    const auto now = clock.now();
    t.phases.push_back({name, SecondsBetween(phase_start, now)});
    say(absl::StrFormat("%s: %.2f s", name, t.phases.back().seconds));
    phase_start = now;
  };
  auto fail = [&](const std::string& phase, const absl::Status& error, bool tear_down) {
    t.failed_phase = phase;
    if (tear_down) {
      say("leaving the group on every agent (nothing stays half-alive)");
      std::vector<absl::Status> left = TearDown(ctx, true, "up failed in " + phase, true);
      for (size_t i = 0; i < left.size(); ++i) {
        if (!left[i].ok()) say(absl::StrCat("  ", ctx.spec.nodes[i].name, ": could not leave: ", left[i].message()));
      }
    }
    t.total_seconds = SecondsBetween(start, clock.now());
    return error;
  };

  // 1. Preflight: any failure stops here, before an agent is touched.
  PreflightReport preflight = RunPreflight(ctx, options);
  end_phase("preflight");
  if (absl::Status verdict = PreflightVerdict(preflight); !verdict.ok()) {
    t.preflight_table = FormatPreflightTable(preflight, t.phases.back().seconds);
    return fail("preflight", verdict, false);
  }

  // 2. Plan: what is running now decides the generation (and whether there is anything to do).
  absl::StatusOr<ClusterNow> now = ObserveForUp(ctx);
  if (!now.ok()) return fail("plan", now.status(), false);
  if (options.accept_serving) {
    if (std::optional<UpResult> serving = AlreadyServing(*now)) {
      say(absl::StrCat("already serving generation ", serving->generation, ": nothing to do"));
      t.total_seconds = SecondsBetween(start, clock.now());
      return *serving;
    }
  }
  absl::StatusOr<UpPlan> plan = PlanGroup(ctx, *now, preflight);
  if (!plan.ok()) return fail("plan", plan.status(), false);
  std::string plan_text = DescribePlan(plan->plan);
  if (!plan_text.empty() && plan_text.back() == '\n') plan_text.pop_back();
  say(plan_text);
  if (plan->leftovers) {
    // A previous group (or a failed one) is still loaded somewhere: start from nothing.
    say("leaving the previous group on every agent first");
    TearDown(ctx, true, "up: replacing the previous group", true);
  }
  end_phase("plan");

  // Optional: the group's own collectives before any weights load (the agents are idle now, and a
  // slow or broken fabric is cheaper to learn before a 30-minute load than after it).
  if (ctx.spec.fabric_check.enabled) {
    t.fabric = RunFabricCheck(plan->plan, *ctx.agents, FabricCheckOptionsFromSpec(ctx.spec.fabric_check));
    for (absl::string_view line : absl::StrSplit(FormatFabricTable(*t.fabric), '\n', absl::SkipEmpty())) {
      say(std::string(line));
    }
    end_phase("fabric");
    // Nothing was loaded: there is nothing to tear down.
    if (absl::Status fabric = FabricVerdict(*t.fabric); !fabric.ok()) return fail("fabric", fabric, false);
  }

  // 3-6. Load, join, probe, open the gate; a failure from here on leaves the group everywhere.
  absl::Status loaded = LoadRanks(ctx, plan->plan, clock, say);
  end_phase("load");
  if (!loaded.ok()) return fail("load", loaded, true);

  absl::StatusOr<JoinedGroup> joined = JoinRanks(ctx, plan->plan, clock, say);
  end_phase("join");
  if (!joined.ok()) return fail("join", joined.status(), true);
  UpResult res;
  res.generation = plan->plan.generation;
  res.api_endpoint = joined->api_endpoint;
  res.transport = joined->transport;
  // The group's first collective ran inside JoinGroup with the production comm env: report the
  // transport it used (the timed check before the load is `fabric_check: true`, above).
  say(absl::StrCat("fabric: transport ", res.transport.empty() ? "unknown" : res.transport));

  // The probe runs before anyone else can send a request: the gate opens only after it.
  absl::Status probed = ProbeGroup(ctx, res.generation, say);
  end_phase("probe");
  if (!probed.ok()) return fail("probe", probed, true);

  absl::Status opened = OpenServing(ctx);
  end_phase("serving");
  if (!opened.ok()) return fail("serving", opened, true);
  t.total_seconds = SecondsBetween(start, clock.now());
  return res;
}

}  // namespace tandem::controller
