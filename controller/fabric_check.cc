#include "controller/fabric_check.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "controller/cluster_ops.h"

namespace tandem::controller {
namespace {

using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

uint64_t UnixMs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

std::string RankName(const FabricRankReport& r) { return absl::StrCat(r.node, " (rank ", r.rank, ")"); }

// "64 MiB", "4 KiB", "1000 B": how the loops' sizes read in the table.
std::string Bytes(uint64_t b) {
  if (b >= (1u << 20) && b % (1u << 20) == 0) return absl::StrCat(b >> 20, " MiB");
  if (b >= 1024 && b % 1024 == 0) return absl::StrCat(b >> 10, " KiB");
  return absl::StrCat(b, " B");
}

// The worst figures over the ranks that answered, and the thresholds each rank missed.
void Summarize(FabricReport& rep) {
  std::vector<std::string> transports;
  bool first = true;
  for (const FabricRankReport& r : rep.ranks) {
    if (!r.status.ok()) {
      rep.problems.push_back(absl::StrCat(RankName(r), ": ", r.status.message()));
      continue;
    }
    const v1::CheckFabricResponse& f = r.figures;
    transports.push_back(f.transport());
    rep.latency_median_us = std::max(rep.latency_median_us, f.small_median_us());
    rep.latency_p99_us = std::max(rep.latency_p99_us, f.small_p99_us());
    rep.busbw_gbps = first ? f.large_busbw_gbps() : std::min(rep.busbw_gbps, f.large_busbw_gbps());
    rep.algbw_gbps = first ? f.large_algbw_gbps() : std::min(rep.algbw_gbps, f.large_algbw_gbps());
    first = false;
    if (rep.min_busbw_gbps && f.large_busbw_gbps() < *rep.min_busbw_gbps) {
      rep.problems.push_back(absl::StrFormat("%s: bus bandwidth %.3g GB/s is below fabric_check.min_busbw_gbps %g",
                                             RankName(r), f.large_busbw_gbps(), *rep.min_busbw_gbps));
    }
    if (rep.max_latency_us && f.small_median_us() > *rep.max_latency_us) {
      rep.problems.push_back(absl::StrFormat("%s: %s all-reduce median %.1f us is above fabric_check.max_latency_us %g",
                                             RankName(r), Bytes(f.small_bytes()), f.small_median_us(),
                                             *rep.max_latency_us));
    }
  }
  std::sort(transports.begin(), transports.end());
  transports.erase(std::unique(transports.begin(), transports.end()), transports.end());
  rep.transport = absl::StrJoin(transports, ",");
}

// The first rank that answered (its loop sizes describe the whole check), or null.
const v1::CheckFabricResponse* AnyFigures(const FabricReport& rep) {
  for (const FabricRankReport& r : rep.ranks) {
    if (r.status.ok()) return &r.figures;
  }
  return nullptr;
}

}  // namespace

FabricCheckOptions FabricCheckOptionsFromSpec(const FabricCheckSpec& spec) {
  FabricCheckOptions o;
  o.timeout = spec.timeout;
  o.min_busbw_gbps = spec.min_busbw_gbps;
  o.max_latency_us = spec.max_latency_us;
  return o;
}

FabricReport RunFabricCheck(const ClusterPlan& plan, ClusterAgents& agents, const FabricCheckOptions& options) {
  const auto t0 = Steady::now();
  FabricReport rep;
  rep.check_id = options.check_id != 0 ? options.check_id : UnixMs();
  rep.min_busbw_gbps = options.min_busbw_gbps;
  rep.max_latency_us = options.max_latency_us;
  rep.ranks.resize(plan.ranks.size());
  if (!plan.ranks.empty()) rep.backend = plan.ranks[0].load.backend();
  const milliseconds deadline = options.timeout + options.measure_budget;
  // All at once: every rank waits in the rendezvous for the others, in whatever order they come.
  ForEachNode(plan.ranks.size(), [&](size_t i) {
    const RankPlan& p = plan.ranks[i];
    FabricRankReport& r = rep.ranks[i];
    r.rank = p.rank;
    r.node = p.node;
    r.agent = p.agent;
    v1::CheckFabricRequest req;
    req.set_check_id(rep.check_id);
    req.set_rank(p.join.rank());
    req.set_world_size(p.join.world_size());
    req.set_store_endpoint(p.join.store_endpoint());
    req.set_comm_host(p.join.comm_host());
    *req.mutable_comm_env() = p.join.comm_env();
    req.set_backend(p.load.backend());
    req.set_timeout_ms(static_cast<uint32_t>(options.timeout.count()));
    req.set_collective_timeout_ms(static_cast<uint32_t>(options.collective_timeout.count()));
    req.set_small_bytes(options.small_bytes);
    req.set_small_iters(options.small_iters);
    req.set_small_warmup(options.small_warmup);
    req.set_large_bytes(options.large_bytes);
    req.set_large_iters(options.large_iters);
    req.set_large_warmup(options.large_warmup);
    absl::StatusOr<v1::CheckFabricResponse> resp = agents.Control(p.agent)->CheckFabric(req, deadline);
    r.status = resp.status();
    if (resp.ok()) r.figures = std::move(*resp);
  });
  Summarize(rep);
  rep.seconds = std::chrono::duration<double>(Steady::now() - t0).count();
  return rep;
}

FabricReport RunClusterFabricCheck(const ClusterSpec& spec, const AgentCredentials& credentials,
                                   const FabricCheckOptions& options) {
  ClusterContext ctx;
  ctx.spec = spec;
  ctx.credentials = credentials;
  ctx.agents = GrpcClusterAgents(credentials);
  UpOptions facts_only;
  facts_only.hash_weights = false;
  const PreflightReport preflight = RunPreflight(ctx, facts_only);
  absl::StatusOr<ClusterPlan> plan = MakeClusterPlan(spec, preflight, 0, "");
  if (!plan.ok()) {
    FabricReport none;
    none.problems.push_back(absl::StrCat("no group plan: ", plan.status().message()));
    return none;
  }
  return RunFabricCheck(*plan, *ctx.agents, options);
}

std::string WithCollectives(const std::string& output, bool json, const FabricReport* fabric) {
  if (!json) return fabric == nullptr ? output : absl::StrCat(output, "\n", FormatFabricTable(*fabric));
  nlohmann::json j = nlohmann::json::parse(output, nullptr, false);
  if (!j.is_object()) return output;  // not linktest's object: leave it as it is
  j["collectives"] = fabric == nullptr ? nlohmann::json(nullptr) : FabricReportJson(*fabric);
  return j.dump(2) + "\n";
}

absl::Status FabricVerdict(const FabricReport& report) {
  if (report.ok()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("fabric check failed: ", absl::StrJoin(report.problems, "; ")));
}

std::string FormatFabricTable(const FabricReport& rep) {
  std::string out;
  const v1::CheckFabricResponse* any = AnyFigures(rep);
  absl::StrAppend(&out, "fabric check ", rep.check_id, ": ", rep.ranks.size(), " ranks, backend ",
                  rep.backend.empty() ? "cpu" : rep.backend, ", transport ",
                  rep.transport.empty() ? "-" : rep.transport);
  if (any != nullptr) {
    absl::StrAppend(&out, " (", Bytes(any->small_bytes()), " x ", any->small_iters(), ", ", Bytes(any->large_bytes()),
                    " x ", any->large_iters(), ")");
  }
  absl::StrAppend(&out, "\n");
  absl::StrAppendFormat(&out, "%-4s  %-12s  %-11s  %11s  %11s  %10s  %10s  %9s  %s\n", "RANK", "NODE", "TRANSPORT",
                        "MEDIAN_US", "P99_US", "BUSBW_GB/S", "ALGBW_GB/S", "CONNECT_S", "RESULT");
  for (const FabricRankReport& r : rep.ranks) {
    if (!r.status.ok()) {
      absl::StrAppendFormat(&out, "%-4d  %-12s  %-11s  %11s  %11s  %10s  %10s  %9s  FAILED: %s\n", r.rank, r.node, "-",
                            "-", "-", "-", "-", "-", r.status.message());
      continue;
    }
    const v1::CheckFabricResponse& f = r.figures;
    absl::StrAppendFormat(&out, "%-4d  %-12s  %-11s  %11.1f  %11.1f  %10.3f  %10.3f  %9.2f  ok\n", r.rank, r.node,
                          f.transport(), f.small_median_us(), f.small_p99_us(), f.large_busbw_gbps(),
                          f.large_algbw_gbps(), f.connect_seconds());
  }
  absl::StrAppend(&out,
                  "MEDIAN_US / P99_US: each rank's wall time per small all-reduce; BUSBW = ALGBW x 2(n-1)/n, "
                  "NCCL's bus bandwidth of an all-reduce (ALGBW = bytes / median time)\n");
  if (rep.ok()) {
    absl::StrAppendFormat(&out, "fabric: ok: latency median %.1f us, p99 %.1f us, busbw %.3f GB/s (worst rank)\n",
                          rep.latency_median_us, rep.latency_p99_us, rep.busbw_gbps);
  } else {
    absl::StrAppend(&out, "fabric: FAILED: ", absl::StrJoin(rep.problems, "; "), "\n");
  }
  return out;
}

nlohmann::json FabricReportJson(const FabricReport& rep) {
  auto optional = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  nlohmann::json j;
  j["ok"] = rep.ok();
  j["check_id"] = rep.check_id;
  j["backend"] = rep.backend;
  j["world_size"] = rep.ranks.size();
  j["transport"] = rep.transport;
  j["latency_median_us"] = rep.latency_median_us;
  j["latency_p99_us"] = rep.latency_p99_us;
  j["busbw_gbps"] = rep.busbw_gbps;
  j["algbw_gbps"] = rep.algbw_gbps;
  j["busbw_definition"] = "algbw x 2(n-1)/n (NCCL)";
  j["thresholds"] = {{"min_busbw_gbps", optional(rep.min_busbw_gbps)},
                     {"max_latency_us", optional(rep.max_latency_us)}};
  j["problems"] = rep.problems;
  j["seconds"] = rep.seconds;
  j["ranks"] = nlohmann::json::array();
  for (const FabricRankReport& r : rep.ranks) {
    nlohmann::json x = {{"rank", r.rank}, {"node", r.node}, {"agent", r.agent}, {"ok", r.status.ok()},
                        {"error", r.status.ok() ? "" : StatusText(r.status)}};
    if (r.status.ok()) {
      const v1::CheckFabricResponse& f = r.figures;
      x["transport"] = f.transport();
      x["device"] = f.device();
      x["connect_seconds"] = f.connect_seconds();
      x["small_bytes"] = f.small_bytes();
      x["small_iters"] = f.small_iters();
      x["small_median_us"] = f.small_median_us();
      x["small_p99_us"] = f.small_p99_us();
      x["small_min_us"] = f.small_min_us();
      x["small_max_us"] = f.small_max_us();
      x["large_bytes"] = f.large_bytes();
      x["large_iters"] = f.large_iters();
      x["large_median_seconds"] = f.large_median_seconds();
      x["algbw_gbps"] = f.large_algbw_gbps();
      x["busbw_gbps"] = f.large_busbw_gbps();
      x["seconds"] = f.seconds();
    }
    j["ranks"].push_back(std::move(x));
  }
  return j;
}

}  // namespace tandem::controller
