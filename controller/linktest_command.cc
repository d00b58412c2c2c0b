#include "controller/linktest_command.h"

#include <grpcpp/grpcpp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "controller/agent_client.h"
#include "controller/agent_credentials.h"
#include "controller/cluster_ops.h"
#include "controller/cluster_spec.h"
#include "controller/fabric_check.h"
#include "controller/linktest_plan.h"
#include "controller/preflight_command.h"
#include "controller/rpc_error.h"
#include "tandem/v1/agent.grpc.pb.h"

namespace tandem::controller {
namespace {

using std::chrono::milliseconds;

constexpr char kFooter[] =
    "Every ordered pair of nodes (A -> B) in turn: a timed TCP transfer over every interface of A whose subnet holds "
    "an address of B (nodes[].linktest.interfaces or --interfaces choose them), all at the same time, with both "
    "ends' interface counters read around it; then, where the interfaces have RoCE v2 RDMA ports, RDMA WRITEs "
    "for the same time (--transport). One row per interface: Gb/s, verdict (healthy, host-not-sending, "
    "dropped-on-path, pcie-bound, half-unused, no-data), the evidence and a hint (docs/linktest.md).\n"
    "exit status: 0 every half healthy or at its PCIe ceiling, 1 a half is not, a pair could not run or nothing "
    "could be paired, 2 bad usage or cluster file.\n"
    "--json: {\"ok\", \"duration_s\", \"streams\", \"wall_s\", \"pairs\": [{\"from\", \"to\", \"total_gbps\", "
    "\"rdma\", \"error\", \"halves\": [{\"interface\", \"peer_interface\", \"gbps\", \"verdict\", \"evidence\", "
    "\"hint\", \"rdma\", ...}]}]}.";

// "--name DURATION": "5s", "500ms", or a bare number of seconds, within [min, max].
CLI::Option* AddDuration(CLI::App* app, const std::string& name, milliseconds* out, const std::string& help,
                         milliseconds min, milliseconds max) {
  return app
      ->add_option_function<std::string>(
          name,
          [out, name, min, max](const std::string& text) {
            milliseconds d{0};
            if (!ParseDuration(text, &d) || d < min || d > max) {
              throw CLI::ValidationError(name, absl::StrCat("expected a duration such as 5s or 500ms from ",
                                                            min.count() / 1000.0, "s to ", max.count() / 1000.0,
                                                            "s; got \"", text, "\""));
            }
            *out = d;
          },
          help)
      ->type_name("DURATION")
      ->default_str(absl::StrCat(out->count() / 1000.0, "s"));
}

// A fresh secret per transfer: only the sender this test started gets counted by the receiver.
std::string NewToken() {
  std::string token(32, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(token.data()), static_cast<int>(token.size())) != 1) return "";
  return token;
}

// One pair's transfer: the receiver listens first, then the sender runs; a sender that fails
// cancels the receiver so that it stops listening at once.
LinkPairResult RunPair(const ClusterSpec& spec, LinkPairPlan plan, const AgentCredentials& credentials,
                       const LinktestCommandOptions& o) {
  if (!plan.error.empty()) return JudgeLinkPair(plan, v1::LinkSendResponse{}, v1::LinkReceiveSummary{});
  const std::string token = NewToken();
  if (token.empty()) {
    plan.error = "no random bytes for the test's token (OpenSSL RAND_bytes failed)";
    return JudgeLinkPair(plan, v1::LinkSendResponse{}, v1::LinkReceiveSummary{});
  }
  // With both transports the sender runs RDMA for another duration after TCP.
  const milliseconds rpc_timeout = o.duration * (o.transport == "both" || o.transport.empty() ? 2 : 1) + o.timeout;
  std::vector<std::string> shown;
  v1::LinkReceiveRequest rreq;
  for (const LinkHalfPlan& h : plan.halves) {
    v1::LinkEndpoint* e = rreq.add_endpoints();
    e->set_interface(h.peer_interface);
    e->set_ipv4(h.peer_ipv4);
    shown.push_back(absl::StrCat(h.interface, " -> ", h.peer_interface, " (", h.peer_ipv4, ")"));
  }
  rreq.set_token(token);
  rreq.set_streams(static_cast<uint32_t>(o.streams));
  rreq.set_duration_ms(static_cast<uint32_t>(o.duration.count()));
  rreq.set_transport(o.transport);
  std::fprintf(stderr, "linktest: %s -> %s over %s for %.1f s\n", plan.from_name.c_str(), plan.to_name.c_str(),
               absl::StrJoin(shown, ", ").c_str(), o.duration.count() / 1000.0);

  AgentClient receiver(spec.nodes[plan.to].agent, credentials);
  grpc::ClientContext rctx;
  receiver.Prepare(&rctx, rpc_timeout);
  std::unique_ptr<grpc::ClientReader<v1::LinkReceiveEvent>> reader = receiver.stub().LinkReceive(&rctx, rreq);
  v1::LinkReceiveEvent ev;
  if (!reader->Read(&ev) || !ev.has_listening() || ev.listening().ports_size() != rreq.endpoints_size()) {
    rctx.TryCancel();
    const grpc::Status st = reader->Finish();
    plan.error = st.ok() ? absl::StrCat("LinkReceive on ", plan.to_name, ": the agent did not say where it listens")
                         : absl::StrCat("on ", plan.to_name, ": ",
                                        AgentRpcError(st, "LinkReceive", rpc_timeout).message());
    return JudgeLinkPair(plan, v1::LinkSendResponse{}, v1::LinkReceiveSummary{});
  }

  v1::LinkSendRequest sreq;
  for (size_t i = 0; i < plan.halves.size(); ++i) {
    v1::LinkTarget* t = sreq.add_targets();
    t->set_interface(plan.halves[i].interface);
    t->set_local_ipv4(plan.halves[i].ipv4);
    t->set_remote_ipv4(plan.halves[i].peer_ipv4);
    t->set_port(ev.listening().ports(static_cast<int>(i)));
    // The receiver's queue pair (or why it has none, which the sender reports back).
    if (static_cast<int>(i) < ev.listening().rdma_size()) *t->mutable_rdma() = ev.listening().rdma(static_cast<int>(i));
  }
  sreq.set_token(token);
  sreq.set_streams(rreq.streams());
  sreq.set_duration_ms(rreq.duration_ms());
  sreq.set_transport(o.transport);
  AgentClient sender(spec.nodes[plan.from].agent, credentials);
  grpc::ClientContext sctx;
  sender.Prepare(&sctx, rpc_timeout);
  v1::LinkSendResponse sresp;
  const grpc::Status sst = sender.stub().LinkSend(&sctx, sreq, &sresp);
  if (!sst.ok()) {
    rctx.TryCancel();
    reader->Finish();
    plan.error = absl::StrCat("on ", plan.from_name, ": ", AgentRpcError(sst, "LinkSend", rpc_timeout).message());
    return JudgeLinkPair(plan, v1::LinkSendResponse{}, v1::LinkReceiveSummary{});
  }
  // No stream reached the receiver (a firewall, a half that is down): it would wait out its
  // grace for them. Stop it now; every half is judged from the sender's reasons.
  const bool none_connected = std::all_of(sresp.results().begin(), sresp.results().end(),
                                          [](const v1::LinkSendResult& r) { return r.streams_ok() == 0; });
  if (none_connected && sresp.results_size() == rreq.endpoints_size()) {
    rctx.TryCancel();
    reader->Finish();
    v1::LinkReceiveSummary nothing;
    for (const v1::LinkEndpoint& e : rreq.endpoints()) {
      v1::LinkReceiveResult* r = nothing.add_results();
      r->set_interface(e.interface());
      r->set_error("not waited for: no stream of the sender connected");
    }
    return JudgeLinkPair(plan, sresp, nothing);
  }
  absl::StatusOr<v1::LinkReceiveSummary> summary = absl::InternalError("the receiver ended without a summary");
  while (reader->Read(&ev)) {
    if (ev.has_summary()) summary = ev.summary();
  }
  const grpc::Status rst = reader->Finish();
  if (!rst.ok()) summary = AgentRpcError(rst, "LinkReceive", rpc_timeout);
  if (!summary.ok()) {
    plan.error = absl::StrCat("on ", plan.to_name, ": ", summary.status().message());
    return JudgeLinkPair(plan, v1::LinkSendResponse{}, v1::LinkReceiveSummary{});
  }
  return JudgeLinkPair(plan, sresp, *summary);
}

}  // namespace

void AddLinktestFlags(CLI::App* command, LinktestCommandOptions* o) {
  command->footer(kFooter);
  command->add_option("-f,--file", o->cluster_file, "cluster file")->type_name("PATH");
  AddDuration(command, "--duration", &o->duration, "how long each pair sends", milliseconds(1000),
              milliseconds(60000));
  command->add_option("--streams", o->streams, "TCP streams per interface")->check(CLI::Range(1, 16));
  cli::AddJson(command, &o->json);
  AddDuration(command, "--timeout", &o->timeout,
              "deadline of each agent's facts, and what a transfer's calls get beyond --duration", milliseconds(1000),
              milliseconds(600000));
  command->add_option("--interfaces", o->interfaces,
                      "interfaces to test, comma-separated: IF for every node, NODE=IF for one (replaces "
                      "nodes[].linktest.interfaces of the nodes it names)")
      ->delimiter(',')
      ->type_name("LIST")
      ->default_str("");
  command->add_option("--transport", o->transport,
                      "tcp, rdma or both (default: both where the interfaces have RoCE v2 RDMA ports, tcp elsewhere)")
      ->check(CLI::IsMember({"tcp", "rdma", "both"}));
  command->add_flag("--no-collectives", o->no_collectives,
                    "skip the group's own all-reduces (docs/linktest.md \"Collectives\")");
}

int RunLinktest(const LinktestCommandOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<ClusterSpec> spec = LoadClusterSpec(o.cluster_file);
  if (!spec.ok()) return ReportBadConfig(spec.status(), o.json);
  absl::StatusOr<AgentCredentials> credentials = LoadAgentCredentials(*spec);
  if (!credentials.ok()) return ReportBadConfig(credentials.status(), o.json);
  absl::StatusOr<std::vector<std::vector<std::string>>> lists = LinkInterfaceLists(*spec, o.interfaces);
  if (!lists.ok()) return ReportBadConfig(lists.status(), o.json);

  std::vector<absl::StatusOr<v1::NodeFacts>> facts(spec->nodes.size(), absl::UnknownError("not asked"));
  ForEachNode(spec->nodes.size(),
              [&](size_t i) { facts[i] = AgentClient(spec->nodes[i].agent, *credentials).GetFacts("", o.timeout); });
  LinktestReport report;
  report.duration_s = o.duration.count() / 1000.0;
  report.streams = o.streams;
  for (const LinkPairPlan& plan : PlanLinkPairs(*spec, facts, *lists)) {
    report.pairs.push_back(RunPair(*spec, plan, *credentials, o));
    const LinkPairResult& r = report.pairs.back();
    std::vector<std::string> verdicts;
    for (const LinkHalfResult& h : r.halves) {
      verdicts.push_back(absl::StrCat(h.plan.interface, " ", agentd::LinkVerdictName(h.verdict.kind)));
    }
    std::fprintf(stderr, "linktest: %s -> %s: %s\n", r.from.c_str(), r.to.c_str(),
                 r.error.empty() ? absl::StrFormat("%.2f Gb/s (%s)", r.total_gbps, absl::StrJoin(verdicts, ", ")).c_str()
                                 : ("failed: " + r.error).c_str());
  }
  // The group's own collectives (controller/fabric_check.h) after the transfers, so that they do
  // not share the wire with them; a cluster of one node has none.
  std::optional<FabricReport> fabric;
  if (!o.no_collectives && spec->nodes.size() > 1) {
    fabric = RunClusterFabricCheck(*spec, *credentials, FabricCheckOptionsFromSpec(spec->fabric_check));
  }
  report.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string text = WithCollectives(o.json ? FormatLinktestJson(report) : FormatLinktestTable(report), o.json,
                                           fabric ? &*fabric : nullptr);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  return report.ok() && (!fabric || fabric->ok()) ? kExitOk : kExitChecksFailed;
}

}  // namespace tandem::controller
